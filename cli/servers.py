"""The servers `agents up` starts for one machine, and stopping them.

Whatever the environment does not point at (NATS_URL, MONGODB_URI) is started from the
installed wheels (deploy.embedded). The ports and the data dir are checked before
anything starts, a Ctrl-C while a server starts is held until it has started (so
nothing is left running that nobody stops), and the servers stop in reverse order, last.
"""

from __future__ import annotations

import logging
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from cli.errors import USAGE_ERROR, fail
from deploy.embedded import (
    EmbeddedServerError,
    ManagedServer,
    ensure_port_free,
    start_mongo,
    start_nats,
)

if TYPE_CHECKING:
    from bootstrap.settings import Settings

log = logging.getLogger("cli")

NATS_FLAG = "--nats-port"
MONGO_FLAG = "--mongo-port"
HEALTH_FLAG = "--health-port"


@contextmanager
def terminate_unwinds() -> Iterator[None]:
    """Make SIGTERM unwind like Ctrl-C until the worker app takes over the signals.

    The servers run in their own session, so the default SIGTERM action would kill only
    this process and leave them orphaned, holding the ports and the data dir.
    """

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stop_servers(servers: list[ManagedServer]) -> None:
    """Stop in reverse start order; a second Ctrl-C here must not orphan what is left."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for server in reversed(servers):
            log.info("stopping %s (pid %s)", server.name, server.process.pid)
            server.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def preflight(host: str, nats_port: int | None, mongo_port: int | None,
               data_dir: Path, health_port: int | None = None) -> None:
    """Check the ports and the data dir before starting anything, so a taken Mongo port
    does not first cost a NATS start and stop. `None` means that port is not ours to use."""
    if nats_port is None and mongo_port is None and health_port is None:
        return
    # ensure_port_free reports every bind failure as a taken port; a --host that is not
    # an address of this machine deserves its own message, so probe it first.
    try:
        with socket.socket() as probe:
            probe.bind((host, 0))
    except OSError as exc:
        fail(f"cannot listen on --host {host}: {exc.strerror or exc}", USAGE_ERROR)
    try:
        if nats_port is not None:
            ensure_port_free(host, nats_port, "NATS", NATS_FLAG)
        if mongo_port is not None:
            ensure_port_free(host, mongo_port, "MongoDB (secantusd-py)", MONGO_FLAG)
        if health_port is not None:
            ensure_port_free(host, health_port, "the health endpoint", HEALTH_FLAG)
    except EmbeddedServerError as exc:
        fail(str(exc), USAGE_ERROR)
    if nats_port is None and mongo_port is None:
        return
    if data_dir.exists() and not data_dir.is_dir():
        fail(f"--data-dir {data_dir} is a file, not a directory", USAGE_ERROR)
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"cannot use --data-dir {data_dir}: {exc.strerror or exc}", USAGE_ERROR)


def start_servers(servers: list[ManagedServer], data_dir: Path, host: str,
                   nats_port: int | None, mongo_port: int | None) -> None:
    """Start the needed servers, appending each to the caller's list so its `finally` can
    stop the ones that came up when a later one fails.

    Ctrl-C / SIGTERM are only noted while a server starts: interrupting start_nats or
    start_mongo between spawning the process and returning its handle would leave that
    server running with nobody to stop it. Starting takes seconds, so the wait is short.
    """
    received: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    failure: str | None = None
    try:
        if nats_port is not None:
            servers.append(start_nats(data_dir, port=nats_port, host=host))
        if mongo_port is not None and not received:
            servers.append(start_mongo(data_dir, port=mongo_port, host=host))
    except EmbeddedServerError as exc:
        failure = str(exc)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        raise KeyboardInterrupt
    if failure is not None:
        fail(failure)


def check_given(settings: Settings, nats_given: bool, mongo_given: bool) -> None:
    """The servers NATS_URL / MONGODB_URI name answer, or one line saying which do not
    and what to do (exit 1), before anything starts: `agents up` starts only what the
    environment does not name, and a stale export from an earlier run otherwise ends
    in a worker retrying a dead server, with a traceback per try."""
    if not (nats_given or mongo_given):
        return
    import asyncio

    dead = asyncio.run(_unreachable(settings, nats_given, mongo_given))
    if not dead:
        return
    names = " and ".join(v for v, _ in dead)
    fail(f"{names} {'are' if len(dead) > 1 else 'is'} exported, so agents up starts no "
         f"server for {'them' if len(dead) > 1 else 'it'}, but "
         + "; ".join(why for _, why in dead)
         + f". Start {'those servers' if len(dead) > 1 else 'that server'}, or run "
         f"`unset {' '.join(v for v, _ in dead)}` and agents up starts its own")


async def _unreachable(settings: Settings, nats_given: bool, mongo_given: bool
                       ) -> list[tuple[str, str]]:
    """(variable, why) for each given server that does not answer within seconds."""
    import asyncio

    from bootstrap.ledger import OPERATOR
    from bootstrap.nats_source import LazyNats, NatsUnavailable
    from bootstrap.reachability import describe
    from contracts.shared.persistence import StoreFailure
    from contracts.shared.urls import redact
    from store.mongo_store import MongoStore

    async def nats_dead() -> tuple[str, str] | None:
        source = LazyNats(settings, reconnect=False)
        try:
            await source.client()
        except NatsUnavailable as exc:
            return ("NATS_URL", f"nothing answers at NATS_URL={redact(settings.nats_url)} "
                                f"({exc})")
        finally:
            await source.close()
        return None

    async def mongo_dead() -> tuple[str, str] | None:
        timeout_ms = OPERATOR.mongo_timeout_ms or 3000
        store = MongoStore.connect(settings.mongodb_uri, settings.mongodb_db,
                                   timeout_ms=timeout_ms)
        try:
            await store.ping(timeout_ms / 1000)
        except StoreFailure as exc:
            return ("MONGODB_URI", f"nothing answers at MONGODB_URI="
                                   f"{redact(settings.mongodb_uri)} "
                                   f"({describe(exc, timeout_ms / 1000)})")
        finally:
            await store.close()
        return None

    probes = [*([nats_dead()] if nats_given else []), *([mongo_dead()] if mongo_given else [])]
    dead = [d for d in await asyncio.gather(*probes) if d is not None]
    return dead
