"""Every event the ledger publishes is a CloudEvent in binary mode: read from the stream
by the official CloudEvents SDK, its attributes are what the declarations say, its id is
the Nats-Msg-Id and its body is the contract's, unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats
import pytest
from cloudevents.core.bindings.http import HTTPMessage, from_binary
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent

from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from contracts.decisions.types import DecisionType
from contracts.families import family_of
from contracts.shared.ids import MSG_ID_HEADER, new_id
from deploy.embedded import ManagedServer
from tests.in_process_workers import InProcessWorkers
from tests.integration.wire import events, publish_raw
from workers.event_schemas import SCHEMA_DIR, stale

pytestmark = pytest.mark.e2e

WINDOW = "system: a coding agent\nuser: add a cache"


def as_cloudevent(body: dict[str, Any], headers: dict[str, str]) -> CloudEvent:
    """What a CloudEvents consumer makes of a message: the binary-mode reader of the
    SDK over the NATS headers (the NATS binding maps attributes to `ce-` headers the way
    HTTP does, and `ce-datacontenttype` like any other attribute)."""
    event = from_binary(HTTPMessage(headers=headers, body=json.dumps(body).encode()),
                        JSONFormat(), CloudEvent)
    assert isinstance(event, CloudEvent)
    return event


def check(subject: str, body: dict[str, Any], headers: dict[str, str]) -> CloudEvent:
    event = as_cloudevent(body, headers)
    family = family_of(subject)
    assert family is not None and family.stream is not None
    assert event.get_specversion() == "1.0"
    assert event.get_id() == headers[MSG_ID_HEADER]
    assert event.get_source() == f"/decision-ledger/{family.stream.namespace}"
    assert event.get_type().startswith("io.decision-ledger.")
    assert event.get_type().endswith(".v1")
    assert event.get_time() is not None and event.get_time().tzinfo is not None
    schema = event.get_dataschema()
    assert schema is not None and schema.endswith(f"/{family.name}.json")
    assert (SCHEMA_DIR / f"{family.name}.json").is_file()
    assert event.get_data() == body
    return event


async def test_every_event_of_a_recorded_and_corrected_plan_is_a_cloudevent(
        workers: InProcessWorkers, nats_server: ManagedServer, nc: nats.NATS) -> None:
    async with DecisionRecorder.connect(nats_server.url) as rec:
        root = await rec.root("Add a cache", context=WINDOW)
        strategy = await rec.record(parent=root, decision_type=DecisionType.STRATEGY_CHOICE,
                                    question="Where?", chosen_option="Redis", context=WINDOW)
        await rec.wait_all_persisted([root, strategy], timeout=20)
        await rec.report_violation(invariant_id=new_id(), plan_id=root.plan_id,
                                   severity="warning", details="unknown invariant")
    plan = root.plan_id
    async with CorrectionClient(nc, requested_by="alice") as ops:
        cid = await ops.request(plan, strategy.decision_id, "revert", "Use memcached")
        assert (await ops.wait_for_outcome(cid, plan, timeout=30)).to_status == "applied"
    await publish_raw(nc.jetstream(), f"decisions.recorded.{plan}", b"not json",
                      {MSG_ID_HEADER: "garbage-1"})

    persisted = await events(nc, f"decisions.persisted.{plan}", 0.5)
    assert len(persisted) == 3  # root, strategy, and the revert's replacement
    first = check(*persisted[0])
    assert first.get_type() == "io.decision-ledger.decision.persisted.v1"
    assert first.get_subject() == f"plan/{plan}/decision/{root.decision_id}"

    outcomes = await events(nc, f"corrections.events.{plan}.*", 0.5)
    assert [b["to_status"] for _, b, _ in outcomes] == [
        "pending", "analyzing", "executing", "applied"]
    read = [check(*e) for e in outcomes]
    assert [e.get_type() for e in read] == [
        f"io.decision-ledger.correction.{s}.v1"
        for s in ("pending", "analyzing", "executing", "applied")]
    assert {e.get_subject() for e in read} == {f"plan/{plan}/correction/{cid}"}

    rest = [*await events(nc, f"corrections.attempts.{plan}.*", 0.3),
            *await events(nc, f"corrections.resume.{plan}", 0.3)]
    assert {check(*e).get_type() for e in rest} >= {
        "io.decision-ledger.correction.attempt.complete.v1",
        "io.decision-ledger.correction.resume.v1"}

    [rejection] = await events(nc, "invariants.rejected.*", 1.0)
    assert check(*rejection).get_type() == "io.decision-ledger.invariant.rejected.v1"
    [refused] = await events(nc, "decisions.rejected.*", 1.0)
    event = check(*refused)
    assert event.get_type() == "io.decision-ledger.decision.rejected.v1"
    assert event.get_subject() in (f"plan/{plan}", "plan/unknown")


async def test_the_committed_schemas_are_each_familys_body(tmp_path: Path) -> None:

    assert stale() == [], "stale: run python -m workers.event_schemas"
