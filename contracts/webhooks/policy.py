"""What an operator may subscribe, and how a delivery is bounded: pure rules.

A webhook's URL is operator input the ledger will later send requests to, so it is
checked twice: when it is added (`check_url`: http or https, a host, no user part, at
most 2,048 characters) and before every request (`address_allowed`, on each address the
host resolves to). Without an allowlist only public addresses are allowed: loopback,
private, link-local (cloud metadata services live there), shared, multicast and
reserved ranges are refused, so a webhook cannot make the workers reach what only they
can reach. WEBHOOK_ALLOWED_HOSTS lists the hosts (`hooks.example.com`,
`*.example.com`) and networks (`10.0.0.0/8`, `127.0.0.1/32`) allowed instead.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

URL_MAX = 2048
SCHEMES = ("http", "https")
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class RefusedUrl(ValueError):
    """A URL no webhook may have, with why in one sentence."""


@dataclass(frozen=True, slots=True)
class Allowlist:
    """Hosts and networks a webhook may reach; empty: public addresses only."""

    hosts: tuple[str, ...] = ()
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, entries: str | tuple[str, ...]) -> Allowlist:
        """From `host,*.domain,10.0.0.0/8,::1` (ValueError naming a bad entry)."""
        items = entries.split(",") if isinstance(entries, str) else entries
        hosts: list[str] = []
        networks: list[Network] = []
        for raw in (i.strip().lower() for i in items):
            if not raw:
                continue
            try:
                networks.append(ipaddress.ip_network(raw, strict=False))
            except ValueError:
                if not raw.replace("*.", "", 1).replace("-", "").replace(".", "").isalnum():
                    raise ValueError(f"{raw!r} is neither a host name nor a network") from None
                hosts.append(raw)
        return cls(tuple(hosts), tuple(networks))

    @property
    def empty(self) -> bool:
        return not self.hosts and not self.networks

    def host_listed(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return any(host == h or (h.startswith("*.") and host.endswith(h[1:]))
                   for h in self.hosts)


@dataclass(frozen=True, slots=True)
class WebhookLimits:
    """How deliveries are bounded (WEBHOOK_* settings, docs/webhooks.md)."""

    timeout_seconds: float = 10.0
    """One request, connect to last byte read."""
    max_attempts: int = 8
    backoff: tuple[float, ...] = (5.0, 30.0, 120.0, 600.0, 1800.0, 3600.0, 7200.0)
    """Seconds before the next attempt, by failures so far (the last repeats)."""
    max_age_seconds: float = 86_400.0
    """A delivery not made within this of its event is dead-lettered."""
    per_endpoint: int = 4
    """Requests in flight to one webhook at once."""
    in_flight: int = 32
    """Requests in flight from one worker at once."""
    response_max_bytes: int = 4096
    """Bytes of a response body read (the rest is never read)."""
    allow: Allowlist = Allowlist()


def check_url(url: str) -> str:
    """The URL, if a webhook may have it; RefusedUrl saying why otherwise."""
    if len(url) > URL_MAX:
        raise RefusedUrl(f"the URL is longer than {URL_MAX} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise RefusedUrl(f"not a URL: {exc}") from None
    if parts.scheme.lower() not in SCHEMES:
        raise RefusedUrl(f"only http and https URLs can be webhooks, not {parts.scheme!r}")
    if not parts.hostname:
        raise RefusedUrl("the URL names no host")
    if parts.username is not None or parts.password is not None:
        raise RefusedUrl("the URL holds a user or password: the signature authenticates "
                         "the ledger, and a secret in a URL ends up in logs")
    if port == 0 or any(c.isspace() for c in url):
        raise RefusedUrl("the URL has a zero port or white space")
    return url


def address_allowed(host: str, address: str, allow: Allowlist) -> bool:
    """Whether a request to `host` may go to `address` (one it resolved to)."""
    try:
        ip: Address = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if allow.empty:
        return ip.is_global and not ip.is_multicast
    if allow.host_listed(host):
        return True
    return any(ip in n for n in allow.networks)


def next_delay(failures: int, limits: WebhookLimits) -> float | None:
    """Seconds before the next attempt after `failures` failed ones; None: no more."""
    if failures >= limits.max_attempts or not limits.backoff:
        return None
    return limits.backoff[min(failures, len(limits.backoff)) - 1]
