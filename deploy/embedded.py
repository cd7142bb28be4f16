"""Start the embedded servers that `pip install` brings: nats-server and secantusd-py.

Used by `agents up` and by the test fixtures, so both run exactly the same servers.
Production points NATS_URL / MONGODB_URI at real clusters and never calls this.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


class EmbeddedServerError(RuntimeError):
    """A server could not be started; the message says why and what to do."""


def _binary(name: str) -> str:
    """Console scripts live beside the interpreter in a venv, which may not be on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise EmbeddedServerError(
            f"{name} not found: install the project (pip install -e .) so its wheel brings it"
        )
    return found


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def ensure_port_free(host: str, port: int, what: str, flag: str) -> None:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            raise EmbeddedServerError(
                f"port {port} on {host} is taken, so {what} cannot start there: "
                f"stop whatever listens on it, or pass {flag} with a free port"
            ) from None


def _wait_for_port(host: str, port: int, proc: subprocess.Popen[bytes], log: Path,
                   timeout: float) -> None:
    """Return once the server listens; if it cannot (or we are interrupted), it is stopped."""
    try:
        _poll_port(host, port, proc, log, timeout)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise


def _poll_port(host: str, port: int, proc: subprocess.Popen[bytes], log: Path,
               timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise EmbeddedServerError(f"server exited with code {proc.returncode}:\n{tail}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
            return
        time.sleep(0.05)
    raise EmbeddedServerError(f"server did not listen on {host}:{port} within {timeout}s")


@dataclass
class ManagedServer:
    """A child process we started and must stop."""

    name: str
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    args: list[str] = field(default_factory=list)

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def discard(self) -> None:
        """Killed at once, for a server whose data is thrown away with it (a test's): a
        clean stop takes secantusd-py about 2 s and nats-server about 0.17 s."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def die_with_parent() -> None:
    """Runs in the child before exec: on Linux, ask the kernel to SIGTERM this server
    when the process that started it dies, however it dies (SIGKILL, a test runner's
    timeout). Without it a killed `agents up` or test session leaves servers running.
    It only calls prctl, looked up beforehand, so it takes no lock in the child."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _spawn(name: str, args: list[str], log_path: Path,
           env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("ab")
    # A new session, so Ctrl-C in the terminal reaches only our supervisor, which then
    # stops the servers in order (workers first, then the servers they use).
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, **(env or {})},
                            preexec_fn=die_with_parent)


def start_nats(data_dir: Path, port: int = 4222, host: str = "127.0.0.1",
               timeout: float = 20.0, *, config: Path | None = None,
               env: Mapping[str, str] | None = None) -> ManagedServer:
    """nats-server with JetStream, file storage under data_dir/nats.

    `config` is a server config file read first (the flags override its listen address
    and store), e.g. one that includes deploy/nats-auth.conf; `env` adds the variables
    it names (passwords) to the server's environment only."""
    ensure_port_free(host, port, "NATS", "--nats-port")
    store = data_dir / "nats"
    store.mkdir(parents=True, exist_ok=True)
    args = [_binary("nats-server"), *(["-c", str(config)] if config else []),
            "-a", host, "-p", str(port), "-js", "-sd", str(store)]
    log = data_dir / "logs" / "nats-server.log"
    proc = _spawn("nats", args, log, env)
    _wait_for_port(host, port, proc, log, timeout)
    return ManagedServer("nats", f"nats://{host}:{port}", proc, log, args)


def start_nats_with_config(config: Path, env: dict[str, str], log_path: Path, *,
                           host: str = "127.0.0.1", port: int = 4222,
                           timeout: float = 20.0) -> ManagedServer:
    """nats-server with a configuration file whose `$VARIABLES` come from `env` (the
    production template, deploy/nats-server.conf); `host:port` is where it listens
    for clients, as that file's NATS_LISTEN says."""
    args = [_binary("nats-server"), "-c", str(config)]
    proc = _spawn("nats", args, log_path, env)
    _wait_for_port(host, port, proc, log_path, timeout)
    return ManagedServer("nats", f"nats://{host}:{port}", proc, log_path, args)


@dataclass(frozen=True)
class MongoTls:
    """TLS for secantusd-py: its certificate and key, and the CA its clients'
    certificates must chain to when it requires them (mutual TLS)."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    def args(self) -> list[str]:
        args = ["--tls-cert-file", str(self.cert), "--tls-key-file", str(self.key)]
        if self.client_ca is not None:
            args += ["--tls-ca-file", str(self.client_ca), "--tls-require-client-cert"]
        return args


def start_mongo(data_dir: Path, port: int = 27017, host: str = "127.0.0.1",
                test_commands: bool = False, timeout: float = 30.0, *,
                auth: bool = False, tls: MongoTls | None = None) -> ManagedServer:
    """secantusd-py (MongoDB wire protocol, WiredTiger) with data under data_dir/mongo;
    `auth` requires SCRAM users (created beforehand by a run without it); `tls` makes it
    speak TLS only (clients then add `tls=true&tlsCAFile=...` to the URI)."""
    ensure_port_free(host, port, "MongoDB (secantusd-py)", "--mongo-port")
    store = data_dir / "mongo"
    store.mkdir(parents=True, exist_ok=True)
    args = [_binary("secantusd-py"), "--host", host, "--port", str(port),
            "--storage-path", str(store), "--log-level", "WARNING"]
    if test_commands:
        args.append("--enable-test-commands")
    if auth:
        args.append("--auth")
    if tls is not None:
        args += tls.args()
    log = data_dir / "logs" / "secantusd.log"
    proc = _spawn("mongo", args, log)
    _wait_for_port(host, port, proc, log, timeout)
    return ManagedServer("mongo", f"mongodb://{host}:{port}/?directConnection=true", proc, log,
                         args)
