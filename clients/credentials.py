"""How a NATS connection proves who it is: one definition for workers, CLI and clients.

A server run with deploy/nats-auth.conf admits only known users. The simplest proof is
in the URL (`nats://agent:<password>@host:4222`); the others come from these variables
(`NatsCredentials.from_env`), or are passed to `DecisionRecorder.connect(...,
credentials=...)` and `CorrectionClient.connect`:

    NATS_USER / NATS_PASSWORD   a user of the server's authorization block
    NATS_TOKEN                  a server-wide token (`authorization { token: ... }`)
    NATS_CREDS                  a .creds file (JWT and nkey seed, operator mode)
    NATS_NKEY_SEED              a file holding a user's nkey seed (SU...)
    NATS_TLS_CA                 CA bundle to verify the server (turns TLS on)
    NATS_TLS_CERT / NATS_TLS_KEY  client certificate and key (mutual TLS)
    NATS_INBOX_PREFIX           where replies arrive: `_INBOX_<principal>` under per-principal
                                permissions (else looked up from LEDGER_PRINCIPALS and
                                NATS_NKEY_SEED, or a password user's; clients.inbox)

Files are named by path and checked at start (a missing one is a one-line error naming
its variable); what they hold is never printed, and `repr` leaves the password and the
token out, so settings can be logged.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clients.inbox import check_inbox_prefix, connection_inbox_prefix, inbox_prefix_from_env


@dataclass(frozen=True)
class NatsCredentials:
    """Credentials and TLS for nats-py's `connect`; empty means neither (the default)."""

    user: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    creds_file: Path | None = None
    nkey_seed_file: Path | None = None
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    inbox_prefix: str | None = None
    """Where replies arrive (clients.inbox): `_INBOX_<principal>` under per-principal
    permissions, which let each principal read its own prefix only; None: the password
    user's `_INBOX_<user>`, else `_INBOX` (`inbox_for`)."""

    def __post_init__(self) -> None:
        if self.inbox_prefix is not None:
            check_inbox_prefix(self.inbox_prefix)
        proofs = [name for name, given in (
            ("NATS_USER/NATS_PASSWORD", self.user or self.password),
            ("NATS_TOKEN", self.token), ("NATS_CREDS", self.creds_file),
            ("NATS_NKEY_SEED", self.nkey_seed_file)) if given]
        if len(proofs) > 1:
            raise ValueError(f"give one way to authenticate to NATS, not {' and '.join(proofs)}")
        if bool(self.user) != bool(self.password):
            raise ValueError("NATS_USER and NATS_PASSWORD go together")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("NATS_TLS_CERT and NATS_TLS_KEY go together")
        for variable, path in (("NATS_CREDS", self.creds_file),
                               ("NATS_NKEY_SEED", self.nkey_seed_file),
                               ("NATS_TLS_CA", self.tls_ca), ("NATS_TLS_CERT", self.tls_cert),
                               ("NATS_TLS_KEY", self.tls_key)):
            if path is not None and not path.is_file():
                raise ValueError(f"{variable}={path}: no such file")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NatsCredentials:
        env = os.environ if environ is None else environ

        def text(name: str) -> str | None:
            return env.get(name) or None

        def path(name: str) -> Path | None:
            raw = env.get(name)
            return Path(raw).expanduser() if raw else None

        return cls(user=text("NATS_USER"), password=text("NATS_PASSWORD"),
                   token=text("NATS_TOKEN"), creds_file=path("NATS_CREDS"),
                   nkey_seed_file=path("NATS_NKEY_SEED"), tls_ca=path("NATS_TLS_CA"),
                   tls_cert=path("NATS_TLS_CERT"), tls_key=path("NATS_TLS_KEY"),
                   inbox_prefix=inbox_prefix_from_env(env))

    @property
    def uses_tls(self) -> bool:
        return self.tls_ca is not None or self.tls_cert is not None

    def options(self) -> dict[str, Any]:
        """Keyword arguments for `nats.connect` (and FastStream's NatsBroker)."""
        opts: dict[str, Any] = {}
        if self.user and self.password:
            opts.update(user=self.user, password=self.password)
        if self.token:
            opts["token"] = self.token
        if self.creds_file:
            opts["user_credentials"] = str(self.creds_file)
        if self.nkey_seed_file:
            opts["nkeys_seed"] = str(self.nkey_seed_file)
        if self.uses_tls:
            opts["tls"] = self.tls_context()
        return opts

    def inbox_for(self, url: str) -> str:
        """The inbox prefix of a connection to `url` with these credentials."""
        return connection_inbox_prefix(url, self.inbox_prefix, self.user)

    def tls_context(self) -> ssl.SSLContext:
        """Verifies the server against NATS_TLS_CA (the system's CAs when unset) and
        presents NATS_TLS_CERT when given."""
        context = ssl.create_default_context(
            cafile=str(self.tls_ca) if self.tls_ca else None)
        if self.tls_cert and self.tls_key:
            context.load_cert_chain(str(self.tls_cert), str(self.tls_key))
        return context
