"""`make run`'s process wrapper (scripts/supervise.py) and port check (scripts/check_port.py): nothing a supervised
command started outlives the stack when the stack's process group is SIGKILLed, or the wrapper itself is; a second
`make run` beside an earlier one says who holds the port and stops before migrating."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUPERVISE = ROOT / "scripts" / "supervise.py"
CHECK_PORT = ROOT / "scripts" / "check_port.py"
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")

# The supervised command: it starts a grandchild in its own process group, writes both pids and waits.
COMMAND = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open(sys.argv[1], "w").write(json.dumps({"command": os.getpid(), "grandchild": grandchild.pid}))
    time.sleep(600)
    """
)
# The stack (honcho's part): it starts the wrapper in a session of its own, as honcho does, and waits.
STACK = textwrap.dedent(
    """
    import subprocess, sys, time
    wrapper = subprocess.Popen(sys.argv[1:], start_new_session=True)
    time.sleep(600)
    """
)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_until(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def read_pids(path: Path) -> dict[str, int]:
    assert wait_until(lambda: path.exists() and path.read_text(), 20), "the command did not start"
    return json.loads(path.read_text())


def wrapper_of(command_pid: int) -> int:
    return int(Path(f"/proc/{command_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def supervised(pids_file: Path) -> list[str]:
    return [sys.executable, str(SUPERVISE), "web", "--", sys.executable, "-c", COMMAND, str(pids_file)]


def cleanup(*pids: int) -> None:
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_killing_the_stacks_process_group_stops_everything_it_supervised(tmp_path):
    pids_file = tmp_path / "pids.json"
    stack = subprocess.Popen(
        [sys.executable, "-c", STACK, *supervised(pids_file)], start_new_session=True, stderr=subprocess.DEVNULL
    )
    pids = read_pids(pids_file)
    wrapper = wrapper_of(pids["command"])
    try:
        os.killpg(stack.pid, signal.SIGKILL)  # `kill -9 -- -PGID` of make run's group: make and honcho only
        stack.wait(timeout=10)
        stopped = wait_until(lambda: not any(map(alive, (wrapper, *pids.values()))), 15)
        assert stopped, {name: alive(pid) for name, pid in {"wrapper": wrapper, **pids}.items()}
    finally:
        cleanup(wrapper, *pids.values())


def test_a_wrapper_killed_with_sigkill_takes_its_command_with_it(tmp_path):
    pids_file = tmp_path / "pids.json"
    wrapper = subprocess.Popen(supervised(pids_file), start_new_session=True, stderr=subprocess.DEVNULL)
    pids = read_pids(pids_file)
    try:
        wrapper.kill()
        wrapper.wait(timeout=10)
        assert wait_until(lambda: not alive(pids["command"]), 10)
    finally:
        cleanup(*pids.values())


def listening(argv_tag: str) -> tuple[subprocess.Popen, int]:
    """A process listening on a free port, with `argv_tag` in its command line."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = (
        "import socket, sys, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1);"
        f"s.bind(('127.0.0.1', {port})); s.listen(); print('up', flush=True); time.sleep(600)"
    )
    server = subprocess.Popen([sys.executable, "-c", code, argv_tag], stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "up"
    return server, port


def check_port(port: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK_PORT), str(port)], capture_output=True, text=True, timeout=30)


def test_the_port_check_names_an_earlier_waymark_holding_the_port_and_how_to_stop_it():
    server, port = listening("config.wsgi:application")
    try:
        result = check_port(port)
    finally:
        server.kill()
        server.wait()
    assert result.returncode == 1
    assert f"port {port} is taken by an earlier Waymark (pid {server.pid}); stop it with `kill {server.pid}`" in (
        result.stderr
    )
    assert f"make run PORT={port + 1}" in result.stderr
    assert check_port(port).returncode == 0  # free again


def test_the_port_check_tells_another_program_from_waymark():
    server, port = listening("some-other-server")
    try:
        result = check_port(port)
    finally:
        server.kill()
        server.wait()
    assert result.returncode == 1
    assert f"port {port} is taken by another program (pid {server.pid}" in result.stderr


def test_make_run_beside_an_earlier_one_stops_before_migrating(tmp_path):
    server, port = listening("config.wsgi:application")
    env = {**os.environ, "WAYMARK_VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "config.settings.local"}
    env.pop("DATABASE_URL", None)
    try:
        result = subprocess.run(
            ["bash", "scripts/run.sh", str(port)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
    finally:
        server.kill()
        server.wait()
    assert result.returncode != 0
    assert f"port {port} is taken by an earlier Waymark (pid {server.pid})" in result.stderr
    assert not (tmp_path / "var" / "waymark.sqlite3").exists()  # nothing migrated, nothing seeded
    assert "Waymark is starting" not in result.stdout
