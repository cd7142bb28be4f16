"""One way to print a server URL: without the secret it may carry.

NATS_URL and MONGODB_URI may hold `user:password@` (or a bare NATS token `token@`), and
a MongoDB URI may hold secrets in its query (`tlsCertificateKeyFilePassword=...`);
every log line, banner and error message that names a server goes through `redact`,
so a secret never reaches a terminal, a log file or a bug report. Pure text work,
shared by the workers, the CLI and the client libraries.

The rules lean towards hiding too much, never too little, because the text redacted is
often a URL some parser just refused (a password with a raw `/` or `@` in it):

- A URL runs from `scheme://` to the next whitespace or the next `scheme://` (a NATS_URL
  lists several, comma-separated). So a password may hold any character but
  whitespace and `://`.
- Its userinfo runs to the URL's *last* `@`: a password holding a raw `/`, `@`, `:`,
  `?` or `#` is hidden whole (RFC 3986 would end the authority at the first `/`, and
  print the rest). The user name (up to the first `:`) stays; userinfo without a `:`
  is a token and is hidden whole. The price: a raw `@` later in the URL (in its path
  or query) hides what comes before it, the hosts included.
- A query parameter whose name speaks of a secret (password, pwd, secret, token,
  authMechanismProperties) has its value hidden, up to the next `&`, `;` or `#`.
"""

from __future__ import annotations

import re

MASK = "***"

_URL_START = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://")
"""Where a URL begins: a scheme not glued to a word before it."""

_SPACE = re.compile(r"\s")

_SECRET_PARAM = re.compile(
    r"(?<=[?&;])[A-Za-z0-9_.\-]*(?:password|passwd|pwd|secret|token|authmechanismproperties)"
    r"[A-Za-z0-9_.\-]*=(?P<value>[^&;#\s]*)", re.IGNORECASE)
"""A query parameter holding a secret; `value` is what is hidden."""


def redact(text: str) -> str:
    """`scheme://user:password@host` -> `scheme://user:***@host`; a lone user part (a NATS
    token, say) -> `scheme://***@host`; `?password=x` -> `?password=***`. Text without
    such secrets comes back unchanged."""
    urls = list(_URL_START.finditer(text))
    out: list[str] = []
    shown = 0
    for i, url in enumerate(urls):
        stop = urls[i + 1].start() if i + 1 < len(urls) else len(text)
        space = _SPACE.search(text, url.end(), stop)
        end = space.start() if space else stop
        out += [text[shown:url.end()], _masked(text[url.end():end])]
        shown = end
    out.append(text[shown:])
    return "".join(out)


def _masked(rest: str) -> str:
    """One URL after its `scheme://`, with every secret span replaced by MASK."""
    spans: list[tuple[int, int]] = []
    at = rest.rfind("@")
    if at >= 0:
        colon = rest.find(":", 0, at)
        spans.append((colon + 1 if colon >= 0 else 0, at))
    spans.extend(m.span("value") for m in _SECRET_PARAM.finditer(rest))
    out: list[str] = []
    shown = 0
    for start, end in _merged(spans):
        out += [rest[shown:start], MASK]
        shown = end
    out.append(rest[shown:])
    return "".join(out)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans joined (a secret parameter inside a password, say); an empty
    span (`user:@host`) still gets its MASK, so the output never tells it was empty."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def nats_servers(url: str) -> list[str]:
    """NATS_URL as nats-py wants it: `nats://a:4222,nats://b:4222` (the form the NATS
    tools accept) -> one entry per server; nats-py takes a list, not a comma string."""
    servers = [part.strip() for part in url.split(",") if part.strip()]
    return servers or [url]
