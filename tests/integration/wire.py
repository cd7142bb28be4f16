"""Helpers that talk to the system only through its public subjects, as an agent would."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import nats
from nats.js import JetStreamContext
from pymongo.asynchronous.database import AsyncDatabase

from store.database import Document
from tests.factories import encode, headers, subject


async def publish_all(js: JetStreamContext, decisions: Iterable[dict[str, Any]]) -> None:
    """Publish with Nats-Msg-Id and wait for every JetStream ack."""
    futures = [await js.publish_async(subject(d), encode(d), headers=headers(d))
               for d in decisions]
    await asyncio.gather(*futures)


async def publish_raw(js: JetStreamContext, subj: str, data: bytes,
                      hdrs: dict[str, str] | None = None) -> None:
    await js.publish(subj, data, headers=hdrs)


async def until(probe: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
    """Poll the async `probe` until it returns something truthy, and return that; an
    AssertionError naming its last answer after `timeout` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    last = None
    while asyncio.get_running_loop().time() < deadline:
        last = await probe()
        if last:
            return last
        await asyncio.sleep(0.1)
    raise AssertionError(f"condition not met in {timeout}s (last: {last!r})")


async def drained(js: JetStreamContext, stream: str, durable: str,
                  timeout: float = 30.0) -> None:
    """Wait until nothing is pending or unacknowledged on the durable (its workers ack
    after their writes, so what it took is written); AssertionError after `timeout`."""
    async def probe() -> bool:
        info = await js.consumer_info(stream, durable)
        return bool(info.num_pending == 0 and info.num_ack_pending == 0)
    await until(probe, timeout)


async def wait_for_count(db: AsyncDatabase[Document], collection: str, expected: int,
                         timeout: float = 60.0, query: dict[str, Any] | None = None) -> int:
    deadline = asyncio.get_running_loop().time() + timeout
    count = 0
    while asyncio.get_running_loop().time() < deadline:
        count = await db[collection].count_documents(query or {})
        if count >= expected:
            return count
        await asyncio.sleep(0.2)
    return count


async def events(nc: nats.NATS, filter_subject: str, settle: float = 1.0) -> list[
        tuple[str, dict[str, Any], dict[str, str]]]:
    """Everything the stream holds on `filter_subject`, read with an ordered consumer."""
    js = nc.jetstream()
    sub = await js.subscribe(filter_subject, ordered_consumer=True)
    out = []
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=settle)
            except (TimeoutError, nats.errors.TimeoutError):
                break
            out.append((msg.subject, json.loads(msg.data), dict(msg.headers or {})))
    finally:
        await sub.unsubscribe()
    return out
