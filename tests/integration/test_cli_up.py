"""`agents up` as a user runs it: a real process, real servers, real signals.

The command is run with `python -m cli.main` from this interpreter, so the test needs no
installed console script and exercises exactly the code in the checkout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from deploy.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
READY_MARK = "workers running"


def _env() -> dict[str, str]:
    """Without these unset, `up` would use the caller's servers instead of starting its own."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"NATS_URL", "MONGODB_URI", "MONGODB_DB"}}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _agents(*args: str, output: Path) -> subprocess.Popen[bytes]:
    with output.open("wb") as sink:
        return subprocess.Popen([sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=_env(),
                                stdout=sink, stderr=subprocess.STDOUT)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_until(condition: Callable[[], bool], timeout: float, what: str,
                output: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    pytest.fail(f"{what} not within {timeout}s; output:\n{output.read_text(errors='replace')}")


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:  # refused, or HTTPError 503 while the consumers start
        return False


def _console(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{port}/api/plans", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


@contextlib.contextmanager
def _listening(port: int) -> Iterator[socket.socket]:
    with socket.socket() as sock:
        sock.bind((HOST, port))
        sock.listen()
        yield sock


@pytest.mark.e2e
def test_up_starts_servers_and_workers_and_stops_everything_on_ctrl_c(tmp_path: Path) -> None:
    nats_port, mongo_port, health_port = free_port(), free_port(), free_port()
    console_port = free_port()
    data_dir = tmp_path / "data"
    output = tmp_path / "agents-up.log"
    proc = _agents("up", "--data-dir", str(data_dir), "--nats-port", str(nats_port),
                   "--mongo-port", str(mongo_port), "--health-port", str(health_port),
                   "--console-port", str(console_port), output=output)
    try:
        _wait_until(lambda: _answers(nats_port) and _answers(mongo_port), 20,
                    "both servers listening", output)
        _wait_until(lambda: READY_MARK in output.read_text(errors="replace"), 20,
                    "workers running", output)
        _wait_until(lambda: _ready(health_port), 10, "/readyz answering 200", output)
        _wait_until(lambda: _console(console_port), 10, "the console answering", output)

        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    text = output.read_text(errors="replace")
    assert code == 0, text
    assert "Traceback" not in text
    assert f"export NATS_URL=nats://{HOST}:{nats_port} MONGODB_URI=" in text
    assert f"http://{HOST}:{health_port}/readyz" in text
    assert f"http://{HOST}:{console_port}/" in text
    assert not _answers(console_port), "the console still listening after agents up exited"
    # The banner says what this development run does not make durable.
    assert "not durable" in text and "sync_interval" in text
    assert not _answers(nats_port), "nats-server still listening after agents up exited"
    assert not _answers(mongo_port), "secantusd-py still listening after agents up exited"
    # The data lives under --data-dir, so a second `agents up` finds it again.
    assert (data_dir / "nats").is_dir()
    assert (data_dir / "mongo").is_dir()
    assert (data_dir / "logs" / "nats-server.log").is_file()


@pytest.mark.e2e
@pytest.mark.parametrize("flag", ["--nats-port", "--mongo-port", "--health-port",
                                  "--console-port"])
def test_up_with_a_taken_port_says_which_flag_to_change(tmp_path: Path, flag: str) -> None:
    taken = free_port()
    ports = {"--nats-port": free_port(), "--mongo-port": free_port(),
             "--health-port": free_port(), "--console-port": free_port(), flag: taken}
    other = ports["--nats-port" if flag != "--nats-port" else "--mongo-port"]
    output = tmp_path / "agents-up.log"
    with _listening(taken):
        proc = _agents("up", "--data-dir", str(tmp_path / "data"),
                       *[arg for item in ports.items() for arg in (item[0], str(item[1]))],
                       output=output)
        try:
            code = proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    text = output.read_text(errors="replace")
    assert code == 2, text
    assert str(taken) in text
    assert flag in text
    assert "Traceback" not in text
    assert len(text.strip().splitlines()) == 1, text
    # Nothing was left running on the port that was free.
    assert not _answers(other)


@pytest.mark.e2e
@pytest.mark.parametrize("command", [["workers"], ["up", "--data-dir", "DATA"]])
def test_an_archive_inside_the_agents_tree_is_refused_in_one_line(
        tmp_path: Path, command: list[str]) -> None:
    """Agents write under ARTIFACTS_ROOT: an archive there could be tampered with."""
    output = tmp_path / "out.log"
    args = [str(tmp_path / "data") if a == "DATA" else a for a in command]
    env = {**_env(), "ARTIFACTS_ROOT": str(tmp_path / "work"),
           "ARCHIVE_ROOT": str(tmp_path / "work" / ".archive")}
    with output.open("wb") as out:
        code = subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=env,
                              stdout=out, stderr=subprocess.STDOUT, timeout=30,
                              check=False).returncode
    text = output.read_text(errors="replace")
    assert code == 2, text
    assert "inside ARTIFACTS_ROOT" in text and "Traceback" not in text
    assert len(text.strip().splitlines()) == 1, text
