"""Run one Procfile process so that nothing it started outlives it: `supervise.py NAME -- COMMAND...`.

honcho (`make run`) notices that a process stopped only when the process's output pipe closes. A child left behind
keeps that pipe open: after `kill -9` of the Celery worker's main process its pool processes live on, honcho never
sees the worker stop, and the rest of the stack keeps running and accepting work nobody runs. This wrapper starts
COMMAND in a process group of its own and waits for it; when COMMAND ends, whatever is left in its group is
terminated (then killed), a line says what happened, and the wrapper exits with COMMAND's code, so honcho stops the
whole stack. SIGTERM or SIGINT (honcho stopping the stack) is passed on to the group, which gets STOP_GRACE seconds
before SIGKILL (honcho kills everything after 5 seconds anyway).

Nothing outlives the stack either. `kill -9` of `make run`'s process group kills make and honcho but not the
commands, which honcho starts in sessions of their own: so the wrapper stops its group, as if asked to, as soon as
the stack is gone, which it learns three ways: the Linux parent-death signal (PR_SET_PDEATHSIG: SIGTERM when the
process that started it dies; the Procfile `exec`s the wrapper, so that is honcho's), its parent changing, and the
stack's own pid (WAYMARK_STACK_PID, set by scripts/run.sh) disappearing, checked twice a second. COMMAND itself gets
SIGKILL as its parent-death signal, so even a wrapper killed with SIGKILL leaves no command behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

STOP_GRACE = 4.0


def _die_with_parent(signum: int) -> None:
    """Have the kernel send `signum` to this process when its parent dies (Linux; elsewhere the polls below)."""
    try:
        from billiard.util import set_pdeathsig  # Celery's process library: prctl(PR_SET_PDEATHSIG)
    except ImportError:
        return
    with contextlib.suppress(OSError):  # not Linux
        set_pdeathsig(signum)


def _stack_gone(parent: int, stack: int | None) -> bool:
    """The process that started this wrapper, or the stack's own process (honcho), is no longer there."""
    if os.getppid() != parent:
        return True
    if stack is None:
        return False
    try:
        os.kill(stack, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _command_setup(supervisor: int) -> None:
    """In COMMAND's process, before it starts: it dies with the wrapper, even with a wrapper that died already."""
    _die_with_parent(signal.SIGKILL)
    if os.getppid() != supervisor:
        os.kill(os.getpid(), signal.SIGKILL)


def _say(line: str) -> None:
    with contextlib.suppress(OSError):  # the stack that read our output is gone
        print(line, file=sys.stderr, flush=True)


def _signal_group(pgid: int, signum: int) -> bool:
    """Send `signum` to the group; False when no process is left in it."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # only zombies left (macOS): nothing to stop
        return False
    return True


def _stop_group(pgid: int, grace: float) -> None:
    if not _signal_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if not _signal_group(pgid, 0):
            return
    _signal_group(pgid, signal.SIGKILL)


def _describe(code: int) -> str:
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"exited with code {code}"


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: supervise.py NAME -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    name, command = argv[1], argv[3:]
    parent, me = os.getppid(), os.getpid()
    stack = int(os.environ["WAYMARK_STACK_PID"]) if os.environ.get("WAYMARK_STACK_PID", "").isdigit() else None
    stop_asked: list[float] = []
    child: subprocess.Popen | None = None

    def forward(signum: int, frame: object) -> None:
        if not stop_asked:
            stop_asked.append(time.monotonic())
        if child is not None:
            _signal_group(child.pid, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    _die_with_parent(signal.SIGTERM)  # the parent-death signal arrives as a stop request: forward()
    child = subprocess.Popen(command, process_group=0, preexec_fn=lambda: _command_setup(me))
    if stop_asked:  # asked to stop while it was being started
        _signal_group(child.pid, signal.SIGTERM)
    while True:
        try:
            code = child.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            if not stop_asked and _stack_gone(parent, stack):
                _say(f"{name}: the stack that started it is gone; stopping {command[0]}")
                forward(signal.SIGTERM, None)
            if stop_asked and time.monotonic() - stop_asked[0] > STOP_GRACE:
                _signal_group(child.pid, signal.SIGKILL)
    if not stop_asked:
        _say(
            f"{name}: {command[0]} {_describe(code)}; stopping what it left running, and with it the whole stack "
            "(start it again with `make run`)"
        )
    _stop_group(child.pid, 0.5 if stop_asked else STOP_GRACE)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
