"""One way to print a server URL: without the secret it may carry.

NATS_URL and MONGODB_URI may hold `user:password@` (or a bare NATS token `token@`);
every log line, banner and error message that names a server goes through `redact`,
so a password never reaches a terminal, a log file or a bug report. Pure text work,
shared by the workers, the CLI and the client libraries.
"""

from __future__ import annotations

import re

_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:/@\s]*)"
                       r"(?::(?P<password>[^/@\s]*))?@")
"""The userinfo of every URL in the text (a NATS_URL may list several servers)."""

MASK = "***"


def redact(text: str) -> str:
    """`scheme://user:password@host` -> `scheme://user:***@host`; a lone user part (a NATS
    token, say) -> `scheme://***@host`. Text without userinfo comes back unchanged."""

    def mask(m: re.Match[str]) -> str:
        if m.group("password") is None:
            return f"{m.group('scheme')}{MASK}@"
        return f"{m.group('scheme')}{m.group('user')}:{MASK}@"

    return _USERINFO.sub(mask, text)


def nats_servers(url: str) -> list[str]:
    """NATS_URL as nats-py wants it: `nats://a:4222,nats://b:4222` (the form the NATS
    tools accept) -> one entry per server; nats-py takes a list, not a comma string."""
    servers = [part.strip() for part in url.split(",") if part.strip()]
    return servers or [url]
