"""`check_port.py PORT`: exit 0 when 127.0.0.1:PORT is free; otherwise say who holds it and how to stop it, exit 1.

scripts/run.sh calls it before migrating and seeding, so a second `make run` beside an earlier one (or beside what
an earlier one left running) stops at once with a clear line instead of seeding, starting half a stack and failing
on "Address already in use". The holder is found in /proc (Linux) or with `lsof` (elsewhere). When it is an earlier
Waymark, the line names what to kill to stop that whole stack: honcho when it is still there (it stops the rest),
otherwise every supervised process of that checkout still running.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # state LISTEN
                inodes.add(fields[9])
    return inodes


def listener_pid(port: int) -> int | None:
    """The pid of a process with a socket listening on `port`, or None when it cannot be told."""
    inodes = _listening_inodes(port)
    if inodes:
        wanted = {f"socket:[{inode}]" for inode in inodes}
        for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):  # a server before its workers
            try:
                if any(os.readlink(f"/proc/{pid}/fd/{fd}") in wanted for fd in os.listdir(f"/proc/{pid}/fd")):
                    return pid
            except OSError:
                continue
        return None
    try:
        found = subprocess.run(
            ["lsof", "-nP", f"-iTCP:{port}", "-sTCP:LISTEN", "-t"], capture_output=True, text=True, timeout=10
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return int(found[0]) if found else None


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        try:
            return subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True).stdout
        except OSError:
            return ""


def parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _same_checkout(pid: int) -> bool:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd")) == ROOT
    except OSError:
        return False


def _stack_root(pid: int) -> int | None:
    """honcho above the process that holds the port, when it is still running."""
    current = parent_pid(pid)
    while current and current > 1:
        if "honcho" in command_line(current):
            return current
        current = parent_pid(current)
    return None


def _supervised_left() -> list[int]:
    """The supervise.py processes of this checkout still running (what an earlier stack left behind)."""
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()] if Path("/proc/self").exists() else []
    return sorted(pid for pid in pids if "scripts/supervise.py" in command_line(pid) and _same_checkout(pid))


def message(port: int, pid: int | None) -> str:
    if pid is None:
        return f"port {port} is taken; free it or start Waymark on another port: make run PORT={port + 1}"
    command = command_line(pid)
    if "config.wsgi" not in command:
        return (
            f"port {port} is taken by another program (pid {pid}: {command[:80]}); stop it or start Waymark on "
            f"another port: make run PORT={port + 1}"
        )
    root = _stack_root(pid)
    if root is not None:
        how = f"Ctrl-C where it runs, or `kill {root}` (its honcho: it stops the rest)"
    else:
        left = _supervised_left() or [pid]
        how = f"`kill {' '.join(map(str, left))}` (what it left running)"
    return (
        f"port {port} is taken by an earlier Waymark (pid {pid}); stop it with {how}, "
        f"or start this one on another port: make run PORT={port + 1}"
    )


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: check_port.py PORT", file=sys.stderr)
        return 2
    port = int(argv[1])
    if port_free(port):
        return 0
    print(message(port, listener_pid(port)), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
