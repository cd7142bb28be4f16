"""Webhooks end to end: `agents webhook add` subscribes local receivers, the workers
deliver the ledger's events signed per Standard Webhooks (verified by its library), retry
a receiver that times out, answers 500 or answers garbage a bounded number of times and
then dead-letter the delivery, and keep recording meanwhile."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from contracts.decisions.types import DecisionType
from contracts.webhooks.families import DISPATCHER
from deploy.embedded import ManagedServer
from store.database import Document
from tests.conftest import worker_env
from tests.factories import plan_tree
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import Agents, agents, assert_one_line_error
from tests.integration.webhook_receivers import Receivers, receivers
from tests.integration.wire import events, publish_all, until, wait_for_count

__all__ = ["agents"]

pytestmark = pytest.mark.e2e

WINDOW = "system: a coding agent\nuser: add a cache"
WEBHOOK_ENV = {"WEBHOOK_ALLOWED_HOSTS": "127.0.0.1/32", "WEBHOOK_TIMEOUT_SECONDS": "2",
               "WEBHOOK_MAX_ATTEMPTS": "3", "WEBHOOK_BACKOFF": "0.2,0.4",
               "WEBHOOK_MAX_AGE_SECONDS": "120"}


@pytest.fixture
def rx() -> Iterator[Receivers]:
    yield from receivers(slow_seconds=4.0)


async def _add(agents: Agents, rx: Receivers, path: str, *events: str) -> dict[str, Any]:
    args = [a for e in events for a in ("--events", e)]
    added = (await agents.ok("webhook", "add", rx.url(path), *args, "--json")).json
    rx.seen.secrets[path] = added["secret"]
    return dict(added)


async def _dispatching(nc: nats.NATS) -> bool:
    """The dispatchers made their durables (they read from when they were made)."""
    js = nc.jetstream()
    try:
        for stream in ("DECISIONS", "CORRECTIONS"):
            await js.consumer_info(stream, DISPATCHER)
    except nats.js.errors.NotFoundError:
        return False
    return True


@pytest.mark.long
async def test_deliveries_are_signed_retried_bounded_and_dead_lettered(
        rx: Receivers, nats_server: ManagedServer, nc: nats.NATS, mongo_uri: str,
        db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    env = worker_env(nats_server.url, mongo_uri, db_name, **WEBHOOK_ENV,
                     ARCHIVE_ROOT=str(tmp_path / "archive"))
    w = InProcessWorkers(env, tmp_path / "workers.log")
    await w.start(nats_server.url)
    agents = Agents({**env, "USER": "tester", "COLUMNS": "200"})
    try:
        ok = await _add(agents, rx, "/ok", "correction.*", "decision.persisted")
        for path in ("/slow", "/fail", "/garbage"):
            await _add(agents, rx, path, "correction.applied")
        await until(lambda: _dispatching(nc), timeout=20)

        async with DecisionRecorder.connect(nats_server.url) as rec:
            root = await rec.root("Add a cache", context=WINDOW)
            choice = await rec.record(parent=root, decision_type=DecisionType.STRATEGY_CHOICE,
                                      question="Where?", chosen_option="Redis",
                                      context=WINDOW)
            await rec.wait_all_persisted([root, choice], timeout=20)
        plan = root.plan_id
        async with CorrectionClient(nc, requested_by="alice") as ops:
            cid = await ops.request(plan, choice.decision_id, "revert", "Use memcached")
            assert (await ops.wait_for_outcome(cid, plan, timeout=30)).to_status == "applied"
        # The ledger keeps recording while three endpoints fail and time out.
        busy = plan_tree(100, seed=5)
        await publish_all(nc.jetstream(), busy)
        assert await wait_for_count(db, "decisions", 100, timeout=60,
                                    query={"plan_id": busy[0]["plan_id"]}) == 100

        async def ended() -> list[dict[str, Any]] | None:
            r = await agents.ok("webhook", "deliveries", "--status", "dead_lettered",
                                "--json")
            return r.json if len(r.json) == 3 else None

        dead = await until(ended, timeout=60)

        async def plan_persisted() -> bool:  # its root, its choice, the replacement
            return sum(1 for _, p in rx.seen.verified.get("/ok", [])
                       if p.get("plan_id") == plan and "sequence_number" in p) == 3

        await until(plan_persisted, timeout=60)
    finally:
        await w.stop()

    check_received(rx, plan, cid, dead)
    # Their ends are events too, and the secret is never shown again.
    ends = await events(nc, "webhooks.deliveries.*.dead_lettered", 0.5)
    assert len(ends) == 3 and {b["outcome"] for _, b, _ in ends} == {"dead_lettered"}
    listed = await agents.ok("webhook", "list", "--json")
    assert "secret" not in listed.out and ok["secret"] not in listed.out
    assert ok["secret"] not in w.log()
    # The dispatchers' subscriptions go when the workers stop, so the connection's drain
    # does not wait 30 s on them (it did: this test then took 40 s instead of 10).
    assert "DrainTimeoutError" not in w.log()
    assert next(x["webhook_id"] for x in listed.json) == ok["webhook_id"]


def check_received(rx: Receivers, plan: str, cid: str, dead: list[dict[str, Any]]) -> None:
    """What the receivers got, and what the dead-lettered deliveries say."""
    # Every delivery the receiver got verified with the Standard Webhooks library.
    assert rx.seen.refused == []
    got = rx.seen.verified["/ok"]
    types = [h["ce-type"] for h, _ in got]
    assert types.count("io.decision-ledger.decision.persisted.v1") >= 3
    # correction.* is every correction type, each event once (in any order: deliveries
    # to one endpoint run four at a time).
    corrections = sorted(t for t in types if ".correction." in t and ".attempt." not in t)
    assert corrections == sorted(f"io.decision-ledger.correction.{s}.v1" for s in (
        "pending", "analyzing", "executing", "applied", "resume"))
    assert len({h["webhook-id"] for h, _ in got}) == len(got)
    [(applied_headers, applied)] = [(h, p) for h, p in got
                                    if h["ce-type"].endswith("correction.applied.v1")]
    assert applied["correction_id"] == cid and applied["to_status"] == "applied"
    assert applied_headers["webhook-id"] == applied_headers["ce-id"] == f"{cid}:applied"
    assert applied_headers["content-type"] == "application/json"
    assert applied_headers["ce-subject"] == f"plan/{plan}/correction/{cid}"

    # Each failing receiver: exactly its three attempts, then dead-lettered with why.
    # (An attempt at the slow one may time out before it reads the request, on a loaded
    # machine: each of its three attempts is in the record either way.)
    hits = {p: rx.seen.count(p) for p in ("/slow", "/fail", "/garbage")}
    assert 1 <= hits.pop("/slow") <= 3 and hits == {"/fail": 3, "/garbage": 3}, (hits, dead)
    why = {d["webhook_id"]: d["attempts"][-1] for d in dead}
    assert all(len(d["attempts"]) == 3 and d["event_id"] == f"{cid}:applied" for d in dead)
    errors = sorted(str(a["error"]) for a in why.values())
    assert errors[0] == "HTTP 500" and "no answer within 2 s" in errors
    assert any("RemoteProtocolError" in e or "ProtocolError" in e for e in errors), errors
    fail_excerpt = [a["response_excerpt"] for a in why.values() if a["error"] == "HTTP 500"]
    assert fail_excerpt == ["x" * 200]  # read at most a few KB, shown cut


async def test_a_url_is_operator_input(agents: Agents, tmp_path: Path,
                                       db: AsyncDatabase[Document]) -> None:
    for url, why in [("file:///etc/passwd", "only http and https"),
                     ("gopher://127.0.0.1/", "only http and https"),
                     ("http://user:pw@127.0.0.1/hook", "user or password"),
                     ("http:///nohost", "no host")]:
        assert_one_line_error(await agents("webhook", "add", url, "--events", "*"), 2, why)
    assert_one_line_error(await agents("webhook", "add", "https://hooks.example/x",
                                       "--events", "webhook.*"), 2, "own events")
    assert_one_line_error(await agents("webhook", "add", "https://hooks.example/x",
                                       "--events", "Bad Type"), 2, "not an event type")
    # A secret file: a new file, owner-only; the secret is not printed.
    path = tmp_path / "secret"
    added = await agents.ok("webhook", "add", "https://hooks.example/x", "--events",
                            "correction.applied", "--secret-file", str(path))
    secret = path.read_text().strip()
    assert secret.startswith("whsec_") and secret not in added.out
    assert path.stat().st_mode & 0o777 == 0o600
    assert "stored in MongoDB as it is" in added.out
    again = await agents("webhook", "add", "https://hooks.example/x", "--events", "*",
                         "--secret-file", str(path))
    assert_one_line_error(again, 2, "exists")
    [stored] = await db["webhook_secrets"].find().to_list()
    assert stored["scheme"] == "plain"
    wid = (await agents.ok("webhook", "list", "--json")).json[0]["webhook_id"]
    assert "removed" in (await agents.ok("webhook", "remove", wid)).out
    assert_one_line_error(await agents("webhook", "remove", wid), 1, "no active webhook")
    assert await db["webhook_secrets"].count_documents({}) == 0


async def test_a_secret_is_sealed_at_rest_when_a_key_is_set(
        agents: Agents, db: AsyncDatabase[Document]) -> None:
    key = "A" * 43 + "="  # 32 bytes of base64
    added = await agents("webhook", "add", "https://hooks.example/x", "--events", "*",
                         "--json", env={"WEBHOOK_SECRET_KEY": key})
    assert added.code == 0, added.err
    secret = added.json["secret"]
    [stored] = await db["webhook_secrets"].find().to_list()
    assert stored["scheme"] == "secretbox"
    assert secret.encode() not in bytes(stored["sealed"])
    assert json.dumps(added.json).count(secret) == 1


async def test_a_replica_that_stops_leaves_the_dispatch_to_the_other(
        rx: Receivers, nats_server: ManagedServer, nc: nats.NATS, mongo_uri: str,
        db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    """Two replicas share the dispatchers' durable: one that stops lets go of its
    subscriptions at once (no drain left waiting on them) and keeps the durable, so the
    other goes on delivering."""
    env = worker_env(nats_server.url, mongo_uri, db_name, **WEBHOOK_ENV)
    one = InProcessWorkers(env, tmp_path / "one.log")
    two = InProcessWorkers(env, tmp_path / "two.log")
    await one.start(nats_server.url)
    await two.start(nats_server.url)
    try:
        agents = Agents({**env, "USER": "tester", "COLUMNS": "200"})
        await _add(agents, rx, "/ok", "decision.persisted")
        await until(lambda: _dispatching(nc), timeout=20)
        await one.stop()
        assert "DrainTimeoutError" not in one.log()
        assert await _dispatching(nc)
        async with DecisionRecorder.connect(nats_server.url) as rec:
            root = await rec.root("Add a cache", context=WINDOW)
            await rec.wait_all_persisted([root], timeout=20)

        async def delivered() -> bool:
            return any(p.get("decision_id") == root.decision_id
                       for _, p in rx.seen.verified.get("/ok", []))

        await until(delivered, timeout=30)
    finally:
        await one.stop()
        await two.stop()
    assert "DrainTimeoutError" not in two.log()
