"""Connections for the operator commands: MongoDB for reads, NATS for writes.

Every command runs its body through `run`, which owns the event loop and turns a server
that is down or misconfigured into one line naming the variable to fix. Timeouts are
short on purpose: an operator who forgot `agents up` should learn it in seconds, not
after pymongo's default 30 s server selection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from cli.errors import USAGE_ERROR, fail

if TYPE_CHECKING:
    from nats.aio.client import Client
    from pymongo.asynchronous.database import AsyncDatabase

    from clients.operator import CorrectionClient
    from workers.settings import Settings

T = TypeVar("T")

MONGO_TIMEOUT_MS = 3000
NATS_CONNECT_TIMEOUT = 2.0


@dataclass
class Ctx:
    settings: Settings
    db: AsyncDatabase[dict[str, Any]]
    _nc: Client | None = field(default=None)

    async def nats(self) -> Client:
        """Connected on first use, so read-only commands work with NATS down."""
        if self._nc is None:
            import nats  # noqa: PLC0415 - keep `agents --help` fast

            from contracts.shared.urls import nats_servers  # noqa: PLC0415
            from workers.connections import describe  # noqa: PLC0415

            async def quiet(*_: object) -> None:
                # nats-py reports every failed attempt through this callback; the one
                # line `run` prints is the whole story for an operator.
                return None

            try:
                self._nc = await nats.connect(
                    nats_servers(self.settings.nats_url), connect_timeout=NATS_CONNECT_TIMEOUT,
                    allow_reconnect=False, max_reconnect_attempts=1,
                    error_cb=quiet, disconnected_cb=quiet, closed_cb=quiet,
                    **self.settings.nats_credentials.options())
            except (OSError, TimeoutError, nats.errors.Error) as exc:
                raise NatsUnavailable(describe(exc, NATS_CONNECT_TIMEOUT)) from None
        return self._nc

    async def operator(self, requested_by: str) -> CorrectionClient:
        """The operator client over this command's connection: every correction command
        (request, dry run, cancel, fail, retry) is sent by it, as by any client."""
        from clients._publish import RetryPolicy  # noqa: PLC0415
        from clients.operator import CorrectionClient  # noqa: PLC0415

        # A command that cannot publish should say so within seconds, not ride out a
        # leader election as an agent would: 3 tries, about 5 s.
        return CorrectionClient(await self.nats(), requested_by=requested_by,
                                retry=RetryPolicy(attempts=3, ack_timeout=2.0))

    async def publisher(self) -> Any:
        """A JetStream EventPublisher for the services (waits for each PubAck)."""
        from workers.publisher import JetStreamPublisher  # noqa: PLC0415

        return JetStreamPublisher(await self.nats(), ack_timeout=5.0)


class NatsUnavailable(Exception):
    """Connecting to NATS failed; `run` names NATS_URL."""


def parse_id(value: str, what: str) -> str:
    """IDs are ULIDs stored upper case; accept any case, refuse anything else at once."""
    from contracts.shared.ids import is_ulid  # noqa: PLC0415

    if not is_ulid(value):
        fail(f"{what} {value!r} is not a ULID (26 characters of Crockford base32)",
             USAGE_ERROR)
    return value.upper()


def run(body: Callable[[Ctx], Awaitable[T]]) -> T:
    """Run `body` with a connected context; connection trouble becomes one line, exit 1."""
    import nats.errors  # noqa: PLC0415
    from pymongo import AsyncMongoClient  # noqa: PLC0415 - the annotation below
    from pymongo.errors import ConnectionFailure, PyMongoError  # noqa: PLC0415

    from clients._publish import PublishFailed  # noqa: PLC0415
    from contracts.shared.urls import redact  # noqa: PLC0415
    from store.database import connect  # noqa: PLC0415
    from workers.connections import describe  # noqa: PLC0415
    from workers.settings import Settings  # noqa: PLC0415

    # Services log a failed publish with a traceback before the relay retries it; the
    # operator gets the outcome from the command itself.
    logging.getLogger().addHandler(logging.NullHandler())
    logging.lastResort = None
    try:
        settings = Settings.from_env()
    except ValueError as exc:
        fail(f"bad value in the environment: {exc}", USAGE_ERROR)

    async def main() -> T:
        # The workers' durable options (store.database), with short timeouts.
        client: AsyncMongoClient[dict[str, Any]] = connect(
            settings.mongodb_uri, serverSelectionTimeoutMS=MONGO_TIMEOUT_MS,
            connectTimeoutMS=MONGO_TIMEOUT_MS)
        ctx = Ctx(settings, client[settings.mongodb_db])
        try:
            return await body(ctx)
        finally:
            if ctx._nc is not None:
                try:
                    await ctx._nc.drain()
                except Exception:  # closing must not hide the command's outcome
                    await ctx._nc.close()
            await client.close()

    try:
        return asyncio.run(main())
    except ConnectionFailure as exc:
        fail(f"cannot reach MongoDB at MONGODB_URI={redact(settings.mongodb_uri)} "
             f"({describe(exc, MONGO_TIMEOUT_MS / 1000)})")
    except PyMongoError as exc:
        fail(f"MongoDB at MONGODB_URI={redact(settings.mongodb_uri)}: "
             f"{describe(exc, MONGO_TIMEOUT_MS / 1000)}")
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
