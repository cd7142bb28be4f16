"""Where the console listens and who may use it: safe by default.

On a loopback address anyone on this machine may open it, as anyone here may run
`agents`. Bound anywhere else it refuses to start without CONSOLE_TOKEN, and then every
request must carry that token (a bearer header, or the cookie the login form sets).
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8090
MIN_TOKEN_CHARS = 16


class ConsoleConfigError(ValueError):
    """The console must not start with this configuration; the message says what to fix."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


@dataclass(frozen=True, slots=True)
class ConsoleConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None

    def __post_init__(self) -> None:
        if self.token is not None and len(self.token.strip()) < MIN_TOKEN_CHARS:
            raise ConsoleConfigError(
                f"CONSOLE_TOKEN must hold at least {MIN_TOKEN_CHARS} characters")
        if self.token is None and not is_loopback(self.host):
            raise ConsoleConfigError(
                f"the console would listen on {self.host}, beyond this machine: set "
                "CONSOLE_TOKEN (at least 16 characters) so every request must carry it")
        if not 0 <= self.port <= 65535:
            raise ConsoleConfigError(f"port {self.port} is not a TCP port")

    @classmethod
    def from_env(cls, host: str | None = None, port: int | None = None) -> ConsoleConfig:
        """Flags win over CONSOLE_HOST / CONSOLE_PORT; CONSOLE_TOKEN only from the
        environment (a flag would show it in `ps`)."""
        raw_port = os.environ.get("CONSOLE_PORT", "").strip()
        try:
            env_port = int(raw_port) if raw_port else DEFAULT_PORT
        except ValueError:
            raise ConsoleConfigError(f"CONSOLE_PORT={raw_port!r} is not a number") from None
        token = os.environ.get("CONSOLE_TOKEN") or None
        return cls(host=host or os.environ.get("CONSOLE_HOST", "").strip() or DEFAULT_HOST,
                   port=env_port if port is None else port, token=token)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"
