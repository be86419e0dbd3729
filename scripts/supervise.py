"""Run one Procfile process so that nothing it started outlives it: `supervise.py NAME -- COMMAND...`.

honcho (`make run`) notices that a process stopped only when the process's output pipe closes. A child left behind
keeps that pipe open: after `kill -9` of the Celery worker's main process its pool processes live on, honcho never
sees the worker stop, and the rest of the stack keeps running and accepting work nobody runs. This wrapper starts
COMMAND in a process group of its own and waits for it; when COMMAND ends, whatever is left in its group is
terminated (then killed), a line says what happened, and the wrapper exits with COMMAND's code, so honcho stops the
whole stack. SIGTERM or SIGINT (honcho stopping the stack) is passed on to the group, which gets STOP_GRACE seconds
before SIGKILL (honcho kills everything after 5 seconds anyway).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

STOP_GRACE = 4.0


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
    child = subprocess.Popen(command, process_group=0)
    stop_asked: list[float] = []

    def forward(signum: int, frame: object) -> None:
        if not stop_asked:
            stop_asked.append(time.monotonic())
        _signal_group(child.pid, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while True:
        try:
            code = child.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            if stop_asked and time.monotonic() - stop_asked[0] > STOP_GRACE:
                _signal_group(child.pid, signal.SIGKILL)
    if not stop_asked:
        print(
            f"{name}: {command[0]} {_describe(code)}; stopping what it left running, and with it the whole stack "
            "(start it again with `make run`)",
            file=sys.stderr,
            flush=True,
        )
    _stop_group(child.pid, 0.5 if stop_asked else STOP_GRACE)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
