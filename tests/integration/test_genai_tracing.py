"""The clients' spans and the workers' log events follow OpenTelemetry's GenAI agent
conventions: a plan run is an `invoke_agent` span, a tool_invocation an `execute_tool`
child of it, every span names the plan's conversation; a correction's transitions are
log events in the trace of its request (in-memory exporters, real NATS)."""

from __future__ import annotations

import json

import nats
import pytest
from opentelemetry import trace
from opentelemetry._logs import get_logger_provider, set_logger_provider
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bootstrap.publisher import JetStreamPublisher
from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from clients.telemetry import invoke_agent
from contracts.decisions.types import DecisionType
from contracts.shared.ids import new_id
from contracts.shared.outgoing import OutgoingEvent
from contracts.shared.tracing import trace_id
from deploy.embedded import ManagedServer
from tests.conftest import Workers
from tests.integration.wire import events
from workers.streams import ensure_streams

pytestmark = pytest.mark.e2e

WINDOW = "system: a coding agent\nuser: add a cache"


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


@pytest.fixture(scope="module")
def logs() -> InMemoryLogRecordExporter:
    provider = get_logger_provider()
    if not isinstance(provider, LoggerProvider):
        provider = LoggerProvider()
        set_logger_provider(provider)
    exporter = InMemoryLogRecordExporter()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    return exporter


async def test_a_plan_run_is_an_agent_span_and_its_tool_call_an_execute_tool_child(
        spans: InMemorySpanExporter, nats_server: ManagedServer, nc: nats.NATS) -> None:
    await ensure_streams(nc.jetstream())
    plan = new_id()
    async with DecisionRecorder.connect(nats_server.url) as rec:
        with invoke_agent(plan, agent={"name": "billing-agent", "version": "1.2"},
                          model={"provider": "anthropic", "name": "claude-x"}) as run:
            root = await rec.root("Add a cache", context=WINDOW, plan_id=plan)
            choice = await rec.record(parent=root, decision_type=DecisionType.STRATEGY_CHOICE,
                                      question="Where?", chosen_option="Redis", context=WINDOW)
            tool = await rec.record(parent=choice, decision_type="tool_invocation",
                                    question="Check it", chosen_option="pytest tests/cache",
                                    context=WINDOW)
        # Outside any agent span, a plan's root is its own short invoke_agent span.
        alone = await rec.root("Another plan", context=WINDOW)
    finished = {s.attributes.get("ledger.decision_id") if s.attributes else None: s
                for s in spans.get_finished_spans()}
    [agent] = [s for s in spans.get_finished_spans()
               if s.context.span_id == run.get_span_context().span_id]
    assert agent.name == "invoke_agent billing-agent"
    assert dict(agent.attributes or {}).items() >= {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": plan,
        "gen_ai.agent.name": "billing-agent", "gen_ai.agent.version": "1.2",
        "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude-x"}.items()
    by_decision = [finished[d.decision_id] for d in (root, choice, tool)]
    assert [s.name for s in by_decision] == [
        "record_decision prompt_definition", "record_decision strategy_choice",
        "execute_tool pytest tests/cache"]
    for s in by_decision:
        assert s.parent is not None and s.parent.span_id == agent.context.span_id
        assert s.attributes is not None and s.attributes["gen_ai.conversation.id"] == plan
    assert dict(by_decision[2].attributes or {}).items() >= {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pytest tests/cache",
        "gen_ai.tool.call.id": tool.decision_id}.items()
    own = finished[alone.decision_id]
    assert own.name == "invoke_agent" and own.attributes is not None
    assert own.attributes["gen_ai.conversation.id"] == alone.plan_id
    # The message carries the span's context to the workers.
    [(_, _, headers)] = [e for e in await events(nc, f"decisions.recorded.{plan}", 0.3)
                         if e[1]["decision_id"] == tool.decision_id]
    assert trace_id(headers) == f"{agent.context.trace_id:032x}"


async def test_a_correction_is_log_events_in_the_trace_of_its_request(
        spans: InMemorySpanExporter, logs: InMemoryLogRecordExporter, workers_process: Workers,
        nats_server: ManagedServer, nc: nats.NATS) -> None:
    async with DecisionRecorder.connect(nats_server.url) as rec:
        root = await rec.root("Add a cache", context=WINDOW)
        choice = await rec.record(parent=root, decision_type=DecisionType.STRATEGY_CHOICE,
                                  question="Where?", chosen_option="Redis", context=WINDOW)
        await rec.wait_all_persisted([root, choice], timeout=20)
    plan = root.plan_id
    async with CorrectionClient(nc, requested_by="alice") as ops:
        cid = await ops.request(plan, choice.decision_id, "revert", "Use memcached")
        assert (await ops.wait_for_outcome(cid, plan, timeout=30)).to_status == "applied"
    # The worker is another process: its events are published again here, through the
    # publisher every process uses, to see the log events it emits.
    published = await events(nc, f"corrections.events.{plan}.*", 0.5)
    publisher = JetStreamPublisher(nc)
    await publisher.publish_all([
        OutgoingEvent(subject, json.dumps(body).encode(), headers["Nats-Msg-Id"],
                      tuple((k, v) for k, v in headers.items() if k in ("traceparent",)))
        for subject, body, headers in published])
    records = [r.log_record for r in logs.get_finished_logs()
               if (r.log_record.attributes or {}).get("ledger.plan_id") == plan]
    assert [r.event_name for r in records] == [
        f"decision_ledger.correction.{s}"
        for s in ("pending", "analyzing", "executing", "applied")]
    [request] = [s for s in spans.get_finished_spans() if s.name == "correction request"
                 and (s.attributes or {}).get("ledger.correction_id") == cid]
    assert (request.attributes or {})["gen_ai.conversation.id"] == plan
    assert {r.trace_id for r in records} == {request.context.trace_id}
    applied = records[-1]
    assert dict(applied.attributes or {}).items() >= {
        "gen_ai.conversation.id": plan,
        "cloudevents.event_type": "io.decision-ledger.correction.applied.v1",
        "cloudevents.event_id": f"{cid}:applied"}.items()
    assert isinstance(applied.body, dict) and applied.body["correction_id"] == cid
