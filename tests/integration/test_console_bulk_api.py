"""The console's bulk API against the real servers: hostile and malformed bodies are
refused with a reason before anything is read or written, a key that is not an
operator's is refused, and a repeated request with the same batch ID sends nothing
twice."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.shared.ids import new_id
from contracts.shared.rules import Rule, RuleViolation
from store.database import Document
from tests.integration.bulk_support import load_plans
from tests.integration.console_support import Console, console
from workers.streams import ensure_streams

__all__ = ["console"]

pytestmark = pytest.mark.e2e

FILTER = {"text": "leftpad yanked", "decision_type": "tool_invocation"}


async def test_bulk_bodies_are_checked_and_a_repeated_request_sends_once(
        console: Console, nc: nats.NATS, db: AsyncDatabase[Document]) -> None:
    await ensure_streams(nc.jetstream())
    await load_plans(db, 12)
    async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:
        async def refused(path: str, body: Any, status: int, fragment: str) -> None:
            r = await http.post(path, json=body)
            assert r.status_code == status and fragment in r.json()["error"], r.text

        await refused("/api/bulk/preview", {"filter": "leftpad"}, 400, "JSON object")
        await refused("/api/bulk/preview", {"filter": {"state": "bogus"}}, 400, "filter state")
        await refused("/api/bulk/preview", {"filter": {"text": {"$where": "1"}}}, 400,
                      "filter text")
        await refused("/api/bulk/preview", {"filter": {"path": "$ne"}}, 409,
                      "matches no decision")
        await refused("/api/bulk/preview", {"filter": FILTER, "mode": "undo"}, 400,
                      "revert or append")
        await refused("/api/bulk", {"filter": FILTER, "reason": "r", "mode": "append"}, 400,
                      "guidance is required")
        await refused("/api/bulk", {"filter": FILTER}, 400, "reason is required")
        await refused("/api/bulk", {"filter": FILTER, "reason": "r", "batch_id": "x"}, 400,
                      "batch_id must be a ULID")
        assert (await http.get("/api/bulk/not-a-ulid")).status_code == 400
        assert (await http.get(f"/api/bulk/{new_id()}")).status_code == 404
        assert await db.bulk_batches.count_documents({}) == 0

        preview = (await http.post("/api/bulk/preview", json={"filter": FILTER})).json()
        assert (preview["preview"]["matches"], preview["preview"]["to_request"]) == (12, 12)
        body = {"filter": FILTER, "reason": "yanked", "batch_id": preview["batch_id"]}
        first = await http.post("/api/bulk", json=body)
        again = await http.post("/api/bulk", json=body)
        assert first.status_code == again.status_code == 202, (first.text, again.text)
        assert first.json()["batch_id"] == again.json()["batch_id"] == preview["batch_id"]
        for _ in range(40):
            shown = (await http.get(f"/api/bulk/{preview['batch_id']}")).json()
            if shown["state"] == "running":
                break
            await asyncio.sleep(0.25)
        assert shown["counts"] == {"requested": 12}, shown
        stream = await nc.jetstream().stream_info("CORRECTIONS")
        assert stream.state.messages == 12  # the second POST's 12 were duplicates
        await refused("/api/bulk", {**body, "reason": "r", "filter": {"text": "other"}}, 409,
                      "another filter")

        console.deps.bulk_identity = lambda batch_id: RuleViolation(
            rule=Rule.OPERATOR_SCOPE, message="agent keys do not correct")
        await refused("/api/bulk/preview", {"filter": FILTER}, 403,
                      "the bulk correction is refused")
        listed = (await http.get("/api/bulk")).json()["batches"]
        assert [b["batch_id"] for b in listed] == [preview["batch_id"]]
