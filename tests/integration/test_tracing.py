"""One trace from an operator's request to its APPLIED event: the client puts the trace
context in the request's headers, the correction worker carries it onto every event of
the correction and exports its own spans (one per step) in the same trace."""

from __future__ import annotations

from pathlib import Path

import nats
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pymongo.asynchronous.database import AsyncDatabase

from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from contracts.shared.tracing import trace_headers, trace_id
from deploy.embedded import ManagedServer
from store.database import Document
from tests.conftest import Workers, worker_env
from tests.factories import plan_tree
from tests.integration.wire import events, publish_all, until, wait_for_count

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    """This process's spans (the global provider can be set once per process)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


async def test_one_trace_from_the_request_to_the_applied_event(
        spans: InMemorySpanExporter, nats_server: ManagedServer, nc: nats.NATS,
        mongo_uri: str, db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    w = Workers(worker_env(nats_server.url, mongo_uri, db_name, OTEL_TRACES_EXPORTER="console",
                           ARCHIVE_ROOT=str(tmp_path / "archive")),
                tmp_path / "workers.log")
    await w.start(nats_server.url)
    try:
        tree = plan_tree(6, seed=2)
        plan = tree[0]["plan_id"]
        await publish_all(nc.jetstream(), tree)
        assert await wait_for_count(db, "decisions", 6, timeout=30) == 6
        async with CorrectionClient(nc, requested_by="alice") as ops:
            cid = await ops.request(plan, tree[1]["decision_id"], "revert", "Use Postgres")
            outcome = await ops.wait_for_outcome(cid, plan, timeout=30)
        assert outcome.to_status == "applied"
        [request_span] = [s for s in spans.get_finished_spans()
                          if s.name == "correction request"
                          and s.attributes and s.attributes["ledger.correction_id"] == cid]
        want = f"{request_span.context.trace_id:032x}"
        [(_, _, request_headers)] = await events(nc, f"corrections.requested.{plan}", 0.3)
        assert trace_id(request_headers) == want
        # Every event of the correction, the APPLIED one included, is in the same trace.
        published = await events(nc, f"corrections.events.{plan}.*", 0.5)
        assert [b["to_status"] for _, b, _ in published] == [
            "pending", "analyzing", "executing", "applied"]
        assert {trace_id(h) for _, _, h in published} == {want}
        assert all(set(trace_headers(h)) >= {"traceparent"} for _, _, h in published)
        attempts = await events(nc, f"corrections.attempts.{plan}.*", 0.3)
        resume = await events(nc, f"corrections.resume.{plan}", 0.3)
        assert {trace_id(h) for _, _, h in [*attempts, *resume]} == {want}
    finally:
        w.stop()
    # The worker's own spans (console exporter, JSON in its log) are in that trace too,
    # one per step, naming the correction.
    log = await until(lambda: _async(w.log()), timeout=5)
    for step in ("correction pending", "correction analyzing", "correction executing"):
        assert f'"name": "{step}"' in log, step
    assert f'"trace_id": "0x{want}"' in log and f'"ledger.correction_id": "{cid}"' in log


async def _async(value: str) -> str:
    return value


async def test_a_decision_and_its_persisted_event_share_a_trace(
        spans: InMemorySpanExporter, workers_process: Workers, nats_server: ManagedServer,
        nc: nats.NATS) -> None:
    async with DecisionRecorder.connect(nats_server.url) as rec:
        root = await rec.root("Trace me", context="a context window")
        await rec.wait_persisted(root, timeout=20)
    [span] = [s for s in spans.get_finished_spans()
              if s.attributes and s.attributes.get("ledger.decision_id") == root.decision_id]
    assert span.name == "invoke_agent"  # a plan's root, recorded outside an agent span
    assert span.attributes is not None and span.attributes["ledger.plan_id"] == root.plan_id
    [(_, body, headers)] = await events(nc, f"decisions.persisted.{root.plan_id}", 0.3)
    assert body["decision_id"] == root.decision_id
    assert trace_id(headers) == f"{span.context.trace_id:032x}"
