"""Saying in one line why a server cannot be used, and the startup checks of MongoDB.

At startup a server that does not answer within CONNECT_TIMEOUT_SECONDS is a fatal
`StartupFailed` whose message is one line naming the variable to fix: a worker that
waits minutes for a mistyped URL (nats-py's default is 60 tries 2 s apart; the MongoDB
driver's server selection waits 30 s) looks hung to whoever started it. The CLI words
its own failures with the same `describe`.
"""

from __future__ import annotations

import logging
import os
import re

import nats.errors

from contracts.shared.persistence import StoreFailure
from contracts.shared.urls import redact
from store.mongo_store import MongoStore

__all__ = ["STANDALONE_FLAG", "StartupFailed", "describe", "ping_mongo", "require_replica_set",
           "standalone_refusal", "unreachable"]

log = logging.getLogger(__name__)

REASON_LIMIT = 200
"""Longest reason quoted in the one-line error (a topology dump is kilobytes)."""
STANDALONE_FLAG = "ALLOW_STANDALONE_MONGODB"


class StartupFailed(Exception):
    """The worker cannot start; `str()` is the one line printed before exiting non-zero."""


def unreachable(what: str, variable: str, url: str, reason: str) -> StartupFailed:
    return StartupFailed(f"cannot reach {what} at {redact(url)} ({variable}): {reason}")


def _socket_reason(exc: BaseException) -> str | None:
    """A socket error's own words, if `exc` is or quotes one."""
    # asyncio words a refused connection "Connect call failed (host, port)"; the errno
    # says it plainly. The MongoDB driver wraps the same socket error in a topology dump.
    # (A name lookup failure has a negative errno and its own wording.)
    if isinstance(exc, OSError) and exc.errno and exc.errno > 0:
        return os.strerror(exc.errno).lower()
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    errno = re.search(r"\[Errno (-?\d+)\] ([^(,]+)", str(exc))
    if errno:
        number = int(errno.group(1))
        return (os.strerror(number) if number > 0 else errno.group(2).strip()).lower()
    return None


def describe(exc: BaseException | None, timeout: float) -> str:
    """The cause of a failed connection, short: `connection refused`, not a traceback."""
    if exc is None or isinstance(exc, TimeoutError):
        return f"no answer within {timeout:g} s"
    reason = _socket_reason(exc)
    if reason is not None:
        return reason
    text = str(exc).split(", Timeout:", maxsplit=1)[0]
    text = re.sub(r" \(configured timeouts:[^)]*\)", "", text).removeprefix("nats: ")
    text = text.strip().strip("'")
    if type(exc) is nats.errors.Error:
        return redact(text.lower())[:REASON_LIMIT]  # a server's -ERR: "authorization violation"
    if isinstance(exc, StoreFailure):
        brief = text  # its message starts with the driver's error type
    else:
        brief = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return redact(brief)[:REASON_LIMIT]


async def ping_mongo(store: MongoStore, uri: str, timeout: float) -> None:
    """One `ping` within `timeout` (server selection included), else fail naming MONGODB_URI."""
    try:
        await store.ping(timeout)
    except StoreFailure as exc:
        raise unreachable("MongoDB", "MONGODB_URI", uri, describe(exc, timeout)) from None


def standalone_refusal(set_name: str | None, uri: str, *,
                       allow_standalone: bool) -> StartupFailed | None:
    """The one-line refusal to run against a server that is not a replica set, or None.

    A standalone server has no failover and no majority to speak of: `w: majority`
    means that one node, and a lost disk loses acknowledged decisions. Development may
    say so knowingly (`agents up` and the tests set the flag).
    """
    if set_name is not None or allow_standalone:
        return None
    return StartupFailed(
        f"MongoDB at {redact(uri)} (MONGODB_URI) is not a replica set (hello has no "
        f"setName): acknowledged writes would not survive losing that server; point "
        f"MONGODB_URI at a replica set, or set {STANDALONE_FLAG}=1 for development")


async def require_replica_set(store: MongoStore, uri: str, *, allow_standalone: bool) -> None:
    set_name = await store.replica_set_name()
    refusal = standalone_refusal(set_name, uri, allow_standalone=allow_standalone)
    if refusal is not None:
        raise refusal
    if set_name is None:
        log.warning("MongoDB at %s is not a replica set; running anyway (%s=1): "
                    "development only", redact(uri), STANDALONE_FLAG)
