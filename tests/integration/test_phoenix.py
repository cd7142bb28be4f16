"""End to end against a real trace backend: Arize Phoenix, started here on free loopback
ports with its data in a temp dir, receives the clients' and the workers' spans over
OTLP/HTTP, and reads them back through its API as what the GenAI conventions say they
are (an AGENT span for the plan run, a TOOL span for the tool call, the plan as the
session, the correction's steps in its request's trace).

Phoenix is heavy: it is the `phoenix` extra, and these tests have their own marker, run
by .ci/run on a line of their own after installing it (`scripts/test` leaves them out).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from clients.telemetry import invoke_agent
from contracts.decisions.types import DecisionType
from contracts.shared.ids import new_id
from deploy.embedded import ManagedServer, die_with_parent, free_port
from tests.conftest import Workers, worker_env
from tests.integration.wire import until

pytestmark = [pytest.mark.phoenix, pytest.mark.e2e]

WINDOW = "system: a coding agent\nuser: add a cache"
START_TIMEOUT = 180.0
"""Phoenix's first start imports a large stack and migrates its database (39 s seen on
the 2-core machine)."""


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`phoenix serve` on free loopback ports, its data dir a temp dir; its base URL."""
    pytest.importorskip("phoenix.server.main", reason="pip install -e '.[phoenix]'")
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(work), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(free_port()),
           # No request to the internet of its own (fonts, telemetry pixels, downloads).
           "PHOENIX_TELEMETRY_ENABLED": "false", "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false"}
    log = (work / "phoenix.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "phoenix.server.main", "serve"], env=env,
                            cwd=work, stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=die_with_parent)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc, work / "phoenix.log")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"phoenix exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"phoenix not healthy in {START_TIMEOUT}s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def exporting(phoenix: str) -> tuple[TracerProvider, InMemorySpanExporter]:
    """This process's spans go to Phoenix over OTLP/HTTP (and to memory, to find the
    request's trace)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415  # an optional extra
        OTLPSpanExporter,
    )
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(
        OTLPSpanExporter(endpoint=f"{phoenix}/v1/traces")))
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider, memory


def _spans(phoenix: str, trace_ids: list[str]) -> list[dict[str, Any]]:
    from phoenix.client import Client  # noqa: PLC0415  # an optional extra

    found = Client(base_url=phoenix).spans.get_spans(
        project_identifier="default", trace_ids=trace_ids, limit=1000)
    return [dict(s) for s in found]


async def test_a_recorded_plan_and_its_correction_read_back_from_phoenix(
        phoenix: str, exporting: tuple[TracerProvider, InMemorySpanExporter],
        nats_server: ManagedServer, nc: nats.NATS,
        mongo_uri: str, db_name: str, tmp_path: Path) -> None:
    w = Workers(worker_env(nats_server.url, mongo_uri, db_name,
                           OTEL_EXPORTER_OTLP_ENDPOINT=phoenix, OTEL_LOGS_EXPORTER="none",
                           OTEL_BSP_SCHEDULE_DELAY="200",
                           ARCHIVE_ROOT=str(tmp_path / "archive")),
                tmp_path / "workers.log")
    await w.start(nats_server.url)
    plan = new_id()
    try:
        async with DecisionRecorder.connect(nats_server.url) as rec:
            with invoke_agent(plan, agent={"name": "cache-agent", "version": "1.0"},
                              model={"provider": "anthropic", "name": "claude-x"}) as run:
                root = await rec.root("Add a cache", context=WINDOW, plan_id=plan)
                choice = await rec.record(parent=root, question="Where?",
                                          decision_type=DecisionType.STRATEGY_CHOICE,
                                          chosen_option="Redis", context=WINDOW)
                await rec.record(parent=choice, decision_type="tool_invocation",
                                 question="Check it", chosen_option="pytest tests/cache",
                                 context=WINDOW)
            await rec.wait_all_persisted([root, choice], timeout=30)
        async with CorrectionClient(nc, requested_by="alice") as ops:
            cid = await ops.request(plan, choice.decision_id, "revert", "Use memcached")
            assert (await ops.wait_for_outcome(cid, plan, timeout=60)).to_status == "applied"
    finally:
        w.stop()  # flushes the workers' span processor
    provider, memory = exporting
    provider.force_flush()
    run_trace = f"{run.get_span_context().trace_id:032x}"
    [request] = [s for s in memory.get_finished_spans() if s.name == "correction request"
                 and (s.attributes or {}).get("ledger.correction_id") == cid]
    request_trace = f"{request.context.trace_id:032x}"

    async def both() -> list[dict[str, Any]] | None:
        got = _spans(phoenix, [run_trace, request_trace])
        steps = [s for s in got if s["name"].startswith("correction ")]
        return got if len(steps) >= 4 else None  # the request and three steps

    spans = await until(both, timeout=60)
    by_name = {s["name"]: s for s in spans}
    agent = by_name["invoke_agent cache-agent"]
    assert agent["span_kind"] == "AGENT"
    assert agent["attributes"]["gen_ai.conversation.id"] == plan
    assert agent["attributes"]["session.id"] == plan  # Phoenix's session is the plan
    assert agent["attributes"]["gen_ai.request.model"] == "claude-x"
    tool = by_name["execute_tool pytest tests/cache"]
    assert tool["span_kind"] == "TOOL" and tool["attributes"]["tool.name"] == "pytest tests/cache"
    assert tool["parent_id"] == agent["context"]["span_id"]
    assert by_name["record_decision strategy_choice"]["parent_id"] == agent["context"]["span_id"]
    steps = {s["name"] for s in spans if s["context"]["trace_id"] == request_trace}
    assert steps >= {"correction request", "correction pending", "correction analyzing",
                     "correction executing"}
    assert all(s["attributes"].get("gen_ai.conversation.id") == plan for s in spans
               if s["name"].startswith("correction "))

