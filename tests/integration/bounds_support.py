"""Counting what a read costs: the commands a MongoDB client sends, the documents they
return, and the Python memory a call takes at its peak (for the tests that hold the
store's reads to their bounds, and the scripts that print them)."""

from __future__ import annotations

import tracemalloc
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pymongo import AsyncMongoClient, monitoring

from store.database import Document, connect

T = TypeVar("T")


@dataclass
class Commands(monitoring.CommandListener):
    """Every command sent and every document returned, by command name."""

    sent: Counter[str] = field(default_factory=Counter)
    returned: int = 0

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.sent[event.command_name] += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        cursor = event.reply.get("cursor") if isinstance(event.reply, dict) else None
        if isinstance(cursor, dict):
            self.returned += len(cursor.get("firstBatch") or cursor.get("nextBatch") or ())

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def reset(self) -> None:
        self.sent.clear()
        self.returned = 0

    @property
    def reads(self) -> int:
        return sum(self.sent[c] for c in ("find", "getMore", "aggregate", "count"))


def counted_client(uri: str) -> tuple[AsyncMongoClient[Document], Commands]:
    commands = Commands()
    return connect(uri, event_listeners=[commands]), commands


@dataclass(frozen=True)
class Cost:
    reads: int
    """find, getMore, aggregate and count commands sent."""
    documents: int
    """Documents those returned."""
    peak_bytes: int
    """Python memory allocated at the call's peak, above what was held before it."""


async def cost(commands: Commands, call: Callable[[], Awaitable[T]]) -> tuple[T, Cost]:
    """What `call` cost in reads, documents and memory."""
    commands.reset()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        result: Any = await call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, Cost(commands.reads, commands.returned, peak - before)
