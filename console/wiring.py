"""Opening what the console needs, once when it starts: the ledger (through the
bootstrap), NATS connected from the start for the live stream, the operator client.

The console acts as one named operator principal. With CONSOLE_NKEY_SEED it has a key
of its own: its NATS connection authenticates with it and every write it makes is signed
by it (corrections, cancels, fails and retries through the operator client, violation
resolutions as `agents invariant resolve` signs them), so the ledger records the
console's principal as the verified requester. Without it, NATS_NKEY_SEED is its key, as
for any process; without either, its writes are unsigned, and recorded unverified.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

from bootstrap.identity import bulk_identity, resolution_identity
from bootstrap.ledger import OPERATOR, Ledger, open_ledger
from bootstrap.nats_source import LazyNats
from bootstrap.settings import Settings
from clients.credentials import NatsCredentials
from clients.inbox import inbox_prefix_from_env
from clients.operator import CorrectionClient
from console.deps import Deps
from console.live import Hub

SEED_VARIABLE = "CONSOLE_NKEY_SEED"


def console_settings(settings: Settings, environ: Mapping[str, str] | None = None
                     ) -> Settings:
    """The settings the console runs with: with CONSOLE_NKEY_SEED (a file holding the
    console principal's user seed), that key instead of whatever NATS_* authenticates
    with, TLS kept, and the inbox prefix of the principal that key is (the one its
    permissions let it read; NATS_INBOX_PREFIX still wins). ValueError (one line) if
    the file is not there or its key is no principal's of LEDGER_PRINCIPALS."""
    env = os.environ if environ is None else environ
    seed = (env.get(SEED_VARIABLE) or "").strip()
    if not seed:
        return settings
    given = settings.nats_credentials
    try:
        inbox = inbox_prefix_from_env({**env, "NATS_NKEY_SEED": seed})
        own = NatsCredentials(nkey_seed_file=Path(seed).expanduser(), tls_ca=given.tls_ca,
                              tls_cert=given.tls_cert, tls_key=given.tls_key,
                              inbox_prefix=inbox)
    except ValueError as exc:
        raise ValueError(str(exc).replace("NATS_NKEY_SEED", SEED_VARIABLE)) from None
    return dataclasses.replace(settings, nats_credentials=own)


async def operator_client(ledger: Ledger, principal: str) -> CorrectionClient:
    """The one place the console builds its operator client: every correction command
    it sends (request, dry run, cancel, fail, retry) goes through it, signed with the
    ledger's seed (the console's, `console_settings`) and naming `principal`."""
    return await ledger.operator(principal)


@asynccontextmanager
async def open_deps(settings: Settings, principal: str) -> AsyncIterator[Deps]:
    """The routes' dependencies for as long as the console serves; closed after."""
    settings = console_settings(settings)
    ledger = open_ledger(settings, LazyNats(settings, reconnect=True), OPERATOR)
    try:
        nc = await ledger.nats.client()
        deps = Deps.of(ledger, await operator_client(ledger, principal), Hub(nc),
                       principal)
        deps.resolution_identity = partial(resolution_identity, settings)
        deps.bulk_identity = partial(bulk_identity, settings)
        yield deps
    finally:
        await ledger.close()
