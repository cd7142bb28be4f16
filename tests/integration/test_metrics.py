"""`/metrics` of a worker process: what it counted while decisions were recorded and a
correction applied, in Prometheus' text format (parsed by prometheus_client itself)."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import nats
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pymongo.asynchronous.database import AsyncDatabase

from clients.operator import CorrectionClient
from deploy.embedded import ManagedServer, free_port
from store.database import Document
from tests.conftest import worker_env
from tests.factories import plan_tree
from tests.in_process_workers import InProcessWorkers
from tests.integration.wire import publish_all, until, wait_for_count

pytestmark = pytest.mark.e2e


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
          **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_metrics_count_messages_batches_corrections_and_lag(
        nats_server: ManagedServer, nc: nats.NATS, mongo_uri: str,
        db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    port = free_port()
    w = InProcessWorkers(worker_env(nats_server.url, mongo_uri, db_name,
                                    HEALTH_ADDR=f"127.0.0.1:{port}", METRICS_SAMPLE_SECONDS="0.2",
                                    ARCHIVE_ROOT=str(tmp_path / "archive")),
                         tmp_path / "workers.log")
    await w.start(nats_server.url)
    try:
        tree = plan_tree(12, seed=5)
        await publish_all(nc.jetstream(), [*tree])
        await nc.jetstream().publish(f"decisions.recorded.{tree[0]['plan_id']}", b"{not json")
        assert await wait_for_count(db, "decisions", 12, timeout=30) == 12
        async with CorrectionClient(nc, requested_by="alice") as ops:
            cid = await ops.request(tree[0]["plan_id"], tree[1]["decision_id"], "revert")
            await ops.wait_for_outcome(cid, tree[0]["plan_id"], timeout=30)

        async def counted() -> object:
            m = await asyncio.to_thread(scrape, port)
            # Counters move at once; the sampled gauges catch up within a sample.
            done = (value(m, "ledger_corrections_ended_total", mode="revert",
                          outcome="applied") == 1
                    and value(m, "ledger_dead_letters", rule="not_json") == 1
                    and value(m, "ledger_corrections_in_flight", status="pending") == 0
                    and value(m, "ledger_consumer_pending", stream="DECISIONS",
                              consumer="recorder") == 0)
            return m if done else None
        m = await until(counted, timeout=20)
        recorder = {"stream": "DECISIONS", "consumer": "recorder"}
        assert value(m, "ledger_messages_total", outcome="ack", **recorder) == 12
        assert value(m, "ledger_messages_total", outcome="term", **recorder) == 1
        assert value(m, "ledger_batch_size_sum", consumer="recorder") == 13
        assert value(m, "ledger_batch_seconds_count", consumer="recorder") >= 1
        assert value(m, "ledger_correction_seconds_count", mode="revert",
                     outcome="applied") == 1
        assert value(m, "ledger_consumer_pending", **recorder) == 0
        assert value(m, "ledger_corrections_in_flight", status="pending") == 0
        assert value(m, "ledger_sampled_timestamp_seconds") > 0
    finally:
        await w.stop()
