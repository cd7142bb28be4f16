"""Where the console listens, under which names, as whom, and who may use it: safe by
default.

On a loopback address anyone on this machine may open it, as anyone here may run
`agents`. Bound anywhere else it refuses to start without CONSOLE_TOKEN, and then every
request must carry that token (a bearer header) or a session the login form opened.

It answers only requests addressed to a name it is served under (the `Host` header):
the loopback names with its port, the address it is bound to, and CONSOLE_HOSTS. A web
page whose own name was made to resolve to 127.0.0.1 (DNS rebinding) sends its own name
as `Host`, so it is refused: it can neither read the ledger nor ask for a correction.

It acts as one named operator principal (CONSOLE_PRINCIPAL, default `console`): the
name its requests carry and, once its writes are signed, the key that signs them.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8090
DEFAULT_PRINCIPAL = "console"
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
PRINCIPAL_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
"""The principals file's rule for a name (contracts.trust.principals.NAME_PATTERN)."""
_HOST_ENTRY = re.compile(r"(?P<name>[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?|\[[0-9a-f:.]+\])"
                         r"(?::(?P<port>[0-9]{1,5}))?")
WILDCARDS = frozenset({"0.0.0.0", "::", ""})


class ConsoleConfigError(ValueError):
    """The console must not start with this configuration; the message says what to fix."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def _as_host_name(bind: str) -> str:
    """An address as it appears in a Host header (IPv6 in brackets)."""
    return f"[{bind}]" if ":" in bind else bind


def host_values(entry: str, port: int) -> set[str]:
    """The Host header values one served-under name stands for: `name:port` as given, or
    without a port the console's own port and the bare name (what a browser sends
    through a reverse proxy on the scheme's default port)."""
    found = _HOST_ENTRY.fullmatch(entry.strip().lower())
    if found is None:
        raise ConsoleConfigError(
            f"CONSOLE_HOSTS entry {entry.strip()[:80]!r} is not a host name, an address in "
            "brackets or either with :port (no patterns, no schemes)")
    name, given = found["name"], found["port"]
    if given is not None:
        return {f"{name}:{int(given)}"}
    return {name, f"{name}:{port}"}


@dataclass(frozen=True, slots=True)
class ConsoleConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    hosts: tuple[str, ...] = ()
    """More names the console is served under (CONSOLE_HOSTS), beyond the loopback names
    and the address it is bound to."""
    principal: str = DEFAULT_PRINCIPAL
    """The operator principal the console acts as (CONSOLE_PRINCIPAL)."""

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
        if PRINCIPAL_PATTERN.fullmatch(self.principal) is None:
            raise ConsoleConfigError(
                f"CONSOLE_PRINCIPAL {self.principal[:60]!r} is not a principal name "
                "(a-z, 0-9, _ and -, at most 40, starting with a letter or digit)")
        self.served_under()  # every CONSOLE_HOSTS entry checked at start

    def served_under(self) -> frozenset[str]:
        """Every Host header value the console answers (lower case)."""
        names = list(LOOPBACK_NAMES)
        if self.host.lower() not in WILDCARDS:
            names.append(_as_host_name(self.host.lower()))
        values = {f"{name}:{self.port}" for name in names}
        if self.port == 80:
            values.update(names)
        for entry in self.hosts:
            values |= host_values(entry, self.port)
        return frozenset(values)

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
        hosts = tuple(h.strip() for h in os.environ.get("CONSOLE_HOSTS", "").split(",")
                      if h.strip())
        return cls(host=host or os.environ.get("CONSOLE_HOST", "").strip() or DEFAULT_HOST,
                   port=env_port if port is None else port, token=token, hosts=hosts,
                   principal=os.environ.get("CONSOLE_PRINCIPAL", "").strip()
                   or DEFAULT_PRINCIPAL)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"
