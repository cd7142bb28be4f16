"""The console's pure parts: what a live event may carry, and when it may start."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.affected import WALK_MAX, AffectedSets
from console.config import ConsoleConfig, ConsoleConfigError, is_loopback
from console.live import MAX_EVENT_BYTES, Hub, LiveEvent, parse
from contracts.decisions.types import DecisionType
from contracts.impact.views import DecisionView
from contracts.impact.walk import ImpactWalk
from contracts.shared.ids import new_id

pytestmark = pytest.mark.unit


def test_a_ledger_event_is_forwarded_with_only_the_fields_a_page_needs() -> None:
    plan = new_id()
    raw = json.dumps({"decision_id": new_id(), "plan_id": plan.lower(), "sequence_number": 3,
                      "decision_type": "strategy_choice", "parent_decision_id": None,
                      "secret": "x", "nested": {"a": 1}}).encode()
    event = parse("decision", raw)
    assert event is not None and event.plan_id == plan
    assert "secret" not in event.data and "nested" not in event.data
    assert event.sse().startswith(b"event: decision\ndata: {")


@pytest.mark.parametrize("kind", ["approval", "hold"])
def test_an_approval_or_hold_event_is_read_where_it_carries_its_fields(kind: str) -> None:
    plan, decision_id = new_id(), new_id()
    raw = json.dumps({"event_type": "granted", kind: {
        "plan_id": plan, "decision_id": decision_id, "status": "granted",
        "digest": "sha256:x", "guidance": "kept on the record, not on the page"}}).encode()
    event = parse(kind, raw)
    assert event is not None and event.plan_id == plan
    assert event.data == {"plan_id": plan, "decision_id": decision_id, "status": "granted"}
    assert parse(kind, json.dumps({kind: "not an object", "plan_id": plan}).encode()) is None
    assert parse(kind, json.dumps({"plan_id": plan}).encode()) is None


@pytest.mark.parametrize("raw", [
    b"", b"\xff\xfe", b"null", b"[]", b"{}", b'{"plan_id": 5}',
    b'{"plan_id": "<script>alert(1)</script>"}', b'{"plan_id": "a.b.>"}',
    b'{"plan_id": "' + new_id().encode() + b'", "pad": "' + b"x" * MAX_EVENT_BYTES + b'"}',
])
def test_anything_else_is_dropped(raw: bytes) -> None:
    assert parse("decision", raw) is None


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(raw: bytes) -> None:
    parse("correction", raw)


def test_an_event_never_carries_a_newline_into_the_stream() -> None:
    raw = json.dumps({"plan_id": new_id(), "reason": "a\n\ndata: forged\n\n" * 200}).encode()
    event = parse("correction", raw)
    assert event is not None
    frame = event.sse()
    assert frame.count(b"\n\n") == 1 and frame.endswith(b"\n\n")
    assert len(event.data["reason"]) <= 2000


async def test_a_page_too_slow_loses_its_stream_not_the_console_memory() -> None:
    hub = Hub(None)  # type: ignore[arg-type]  # publish() needs no connection
    plan = new_id()
    stream = hub.listen(plan, keepalive=0.05)
    assert (await anext(stream)).startswith(b"retry:")
    pending = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)
    for _ in range(5000):
        hub.publish(LiveEvent("decision", plan, {"plan_id": plan}))
    hub.publish(LiveEvent("decision", new_id(), {}))  # another plan: not this page's
    frames = [await pending]
    async for frame in stream:
        frames.append(frame)
    assert len(frames) <= 1001 and hub.listeners == 0


def test_loopback_needs_no_token_anything_else_does() -> None:
    assert ConsoleConfig().url == "http://127.0.0.1:8090/"
    assert is_loopback("::1") and is_loopback("localhost") and not is_loopback("0.0.0.0")
    with pytest.raises(ConsoleConfigError, match="CONSOLE_TOKEN"):
        ConsoleConfig(host="0.0.0.0")
    with pytest.raises(ConsoleConfigError, match="CONSOLE_TOKEN"):
        ConsoleConfig(host="console.example.com")
    with pytest.raises(ConsoleConfigError, match="16 characters"):
        ConsoleConfig(host="0.0.0.0", token="short")
    assert ConsoleConfig(host="0.0.0.0", token="x" * 16).token


def test_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONSOLE_HOST", "10.0.0.5")
    monkeypatch.setenv("CONSOLE_PORT", "9000")
    monkeypatch.delenv("CONSOLE_TOKEN", raising=False)
    with pytest.raises(ConsoleConfigError):
        ConsoleConfig.from_env()
    assert ConsoleConfig.from_env(host="127.0.0.1").port == 9000
    assert ConsoleConfig.from_env(host="127.0.0.1", port=0).port == 0
    monkeypatch.setenv("CONSOLE_PORT", "eighty")
    with pytest.raises(ConsoleConfigError, match="CONSOLE_PORT"):
        ConsoleConfig.from_env(host="127.0.0.1")


async def test_a_targets_affected_set_is_walked_once_while_kept() -> None:
    calls: list[tuple[str, int]] = []
    gate = asyncio.Event()

    async def walk(target: str, limit: int) -> ImpactWalk:
        calls.append((target, limit))
        await gate.wait()
        if target == "BROKEN":
            raise ConnectionError("the database went away")
        done = ImpactWalk(target, limit)
        done.expand({target: DecisionView(decision_id=target,
                                          decision_type=DecisionType.STRATEGY_CHOICE)}, {})
        return done

    sets = AffectedSets(keep_seconds=60, keep=2)
    asks = [asyncio.create_task(sets.of("A", walk)) for _ in range(3)]
    await asyncio.sleep(0)
    gate.set()
    found = await asyncio.gather(*asks)
    assert calls == [("A", WALK_MAX)]  # three pages asking at once share one walk
    assert {f.ids for f in found} == {frozenset({"A"})} and found[0].complete
    with pytest.raises(ConnectionError):
        await sets.of("BROKEN", walk)
    with pytest.raises(ConnectionError):
        await sets.of("BROKEN", walk)  # a failed walk is not kept: walked again
    assert [c for c, _ in calls] == ["A", "BROKEN", "BROKEN"]
    await sets.of("C", walk)  # keeps 2: A, the oldest, is forgotten
    await sets.of("A", walk)
    assert [c for c, _ in calls] == ["A", "BROKEN", "BROKEN", "C", "A"]
    expired = AffectedSets(keep_seconds=0)
    await expired.of("A", walk)
    await asyncio.sleep(0.01)
    await expired.of("A", walk)
    assert [c for c, _ in calls][-2:] == ["A", "A"]
    # A new dry run walks afresh (the tree may have changed), before anyone asks.
    n = len(calls)
    sets.start("C", walk)
    await asyncio.sleep(0)
    assert len(calls) == n + 1
    await sets.of("C", walk)
    assert len(calls) == n + 1
    sets.start("BROKEN", walk)  # failing with nobody asking: no unretrieved exception
    await asyncio.sleep(0.01)
