"""What every operator command runs with: the ledger, opened once per command.

Every command runs its body through `run`, which opens the ledger (bootstrap.ledger)
when the body starts, closes it when it ends, and turns a server that is down or
misconfigured into one line naming the variable to fix. NATS is connected only when a
command first needs it, so the commands that only read work with NATS down. Timeouts
are short on purpose: an operator who forgot `agents up` should learn it in seconds.

The heavy stack (the driver, nats-py, the services) is imported inside `run`, so
`agents --help` stays instant.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from cli.errors import USAGE_ERROR, fail

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js import JetStreamContext

    from bootstrap.ledger import Ledger
    from bootstrap.settings import Settings
    from clients.operator import CorrectionClient
    from clients.upkeep import UpkeepClient
    from contracts.shared.views import IdKind
    from services.read_ports import LedgerReads

T = TypeVar("T")


@dataclass
class Ctx:
    ledger: Ledger

    @property
    def settings(self) -> Settings:
        return self.ledger.settings

    @property
    def reads(self) -> LedgerReads:
        return self.ledger.reads

    async def connected(self) -> None:
        """Connect NATS now: a command that will publish says NATS is down before it
        acts, not after."""
        await self.ledger.nats.client()

    async def operator(self, requested_by: str) -> CorrectionClient:
        return await self.ledger.operator(requested_by)

    async def nats(self) -> Client:
        return await self.ledger.nats.client()

    async def jetstream(self) -> JetStreamContext:
        return (await self.ledger.nats.client()).jetstream()

    async def upkeep(self) -> UpkeepClient:
        """Comments, plan endings and dead-letter discards, published over NATS."""
        from bootstrap.identity import own_signer
        from bootstrap.ledger import OPERATOR_RETRY
        from clients.upkeep import UpkeepClient

        try:
            signer = own_signer(self.settings)
        except ValueError as exc:
            fail(str(exc))
        return UpkeepClient(await self.ledger.nats.client(), OPERATOR_RETRY, signer=signer)

    async def resolve(self, raw: str, *kinds: IdKind) -> str:
        """The full ID `raw` (a whole ID or its last characters) names among `kinds`;
        one line (exit 1) when none or several end with it."""
        from services.id_lookup import resolve

        return await resolve(self.reads, raw, kinds)


def settings_from_env() -> Settings:
    """The settings, or one line naming the variable that does not parse (exit 2)."""
    from bootstrap.settings import Settings

    try:
        return Settings.from_env()
    except ValueError as exc:
        fail(f"bad value in the environment: {exc}", USAGE_ERROR)


def parse_id(value: str, what: str) -> str:
    """An ID as typed: a whole ULID (upper-cased) or the last 4 or more characters of
    one (resolved later by `Ctx.resolve`, which needs the ledger); anything else is
    refused at once (exit 2), before a server is asked."""
    from contracts.shared.ids import is_ulid
    from contracts.shared.views import SUFFIX_MIN, suffix_of

    if is_ulid(value):
        return value.upper()
    if suffix_of(value) is None:
        fail(f"{what} {value!r} is not a ULID (26 characters of Crockford base32) nor "
             f"its last {SUFFIX_MIN} or more characters", USAGE_ERROR)
    return value.strip()


def run(body: Callable[[Ctx], Awaitable[T]]) -> T:
    """Run `body` with the opened ledger; connection trouble becomes one line, exit 1."""
    # Imported here, not at the top: see the module's docstring.
    import nats.errors

    from bootstrap.ledger import OPERATOR, open_ledger
    from bootstrap.nats_source import LazyNats, NatsUnavailable
    from bootstrap.reachability import describe
    from cli.render import start
    from clients._publish import PublishFailed
    from contracts.shared.persistence import StoreFailure, StoreUnreachable
    from contracts.shared.urls import redact
    from services.id_lookup import IdNotUsable

    # Services log a failed publish with a traceback before the relay retries it; the
    # operator gets the outcome from the command itself.
    logging.getLogger().addHandler(logging.NullHandler())
    logging.lastResort = None
    settings = settings_from_env()
    timeout = (OPERATOR.mongo_timeout_ms or 0) / 1000
    start()

    async def main() -> T:
        ledger = open_ledger(settings, LazyNats(settings, reconnect=False), OPERATOR)
        try:
            return await body(Ctx(ledger))
        finally:
            await ledger.close()

    try:
        return asyncio.run(main())
    except IdNotUsable as exc:
        fail(str(exc))
    except StoreUnreachable as exc:
        fail(f"cannot reach MongoDB at MONGODB_URI={redact(settings.mongodb_uri)} "
             f"({describe(exc, timeout)})")
    except StoreFailure as exc:
        fail(f"MongoDB at MONGODB_URI={redact(settings.mongodb_uri)}: {describe(exc, timeout)}")
    except NatsUnavailable as exc:
        fail(f"cannot reach NATS at NATS_URL={redact(settings.nats_url)} ({exc})")
    except PublishFailed as exc:
        fail(f"NATS at NATS_URL={redact(settings.nats_url)} did not store the command: "
             f"{redact(str(exc))}")
    except nats.errors.NoRespondersError:
        fail("no worker answered on NATS; are the workers running (agents up / agents workers)?")
    except nats.errors.Error as exc:
        fail(f"NATS at NATS_URL={redact(settings.nats_url)}: {type(exc).__name__}: "
             f"{redact(str(exc))}")
