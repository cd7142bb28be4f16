"""Scale-out under faults (issue 9, items 2 and 3), smaller than the scripts run them
(bench/cluster_fault_run.py, bench/workers_fault_run.py print the same table).

Marker `cluster`: three nats-server processes, secantusd-py, several worker processes
and the load run for a minute or two each on 2 cores; left out of `scripts/test` and
of `-m slow`, run one at a time by `.ci/run` (`scripts/test -m cluster -n 0`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from store.database import Document
from tests.integration.scale_support import (
    Size,
    cluster_fault_run,
    curve_table,
    stop_all,
    throughput_curve,
    workers_fault_run,
)

pytestmark = [pytest.mark.cluster, pytest.mark.e2e]


async def test_cluster_loses_the_stream_leader_and_another_node_under_load(
        mongo_uri: str, db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    """kill -9 of the DECISIONS leader, restart, then of the CORRECTIONS leader (or a
    follower), while agents publish and an operator corrects: every acknowledged
    decision recorded once, every correction with one terminal event.

    One worker process: with two, this load loses acknowledged decisions (dead-lettered
    as parent_exists) even when nothing is killed, which is the next test's subject
    (docs/operations.md, "Fault runs at scale"); here the node loss alone is checked."""
    report = await cluster_fault_run(tmp_path, mongo_uri, db, db_name,
                                     Size(decisions=4000, agents=4, correction_plans=6,
                                          spacing=1.5, seed=7), workers=1)
    print("\n" + report.table())
    assert report.problems == []
    assert len([f for f in report.faults if f.what.startswith("kill")]) == 2
    assert report.counts["recorded (MongoDB)"] == report.counts["acknowledged"]


async def test_three_workers_killed_at_random_lose_and_double_nothing(
        mongo_uri: str, db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    """Three `agents workers` processes, random SIGKILLs and restarts during the load,
    then a SIGTERM during load: nothing lost or doubled, per-plan corrections one at a
    time in arrival order, no redelivery after the SIGTERM. Then a short throughput
    curve (printed, never asserted)."""
    report, cluster, ws, nc = await workers_fault_run(
        tmp_path, mongo_uri, db, db_name,
        Size(decisions=3000, agents=3, correction_plans=6, spacing=1.5, seed=11),
        workers=3, kills=4)
    try:
        print("\n" + report.table())
        assert len([f for f in report.faults if f.what.startswith("SIGKILL")]) >= 2
        curve = await throughput_curve(cluster, ws, nc, db, burst=600, reps=1)
        print(curve_table(curve, 600, "test size, machine shared"))
    finally:
        stop_all(ws)
        await nc.close()
        cluster.stop()
    # Broken today, and why (docs/operations.md, "Fault runs at scale"): several workers
    # dead-letter acknowledged decisions of deep trees as parent_exists (without any
    # kill too); a SIGTERM'd worker leaves a few fetched messages to be redelivered;
    # pairs of a plan's corrections recorded a moment apart may run out of order. Any
    # other broken promise fails the test; once these are fixed, it passes.
    known = [p for p in report.problems if any(k in p for k in KNOWN)]
    assert [p for p in report.problems if p not in known] == []
    if known:
        pytest.xfail("known: " + " | ".join(p[:200] for p in known))



KNOWN = ("acknowledged decisions not recorded", "redeliveries by the recorder's consumer",
         "out of arrival order")
"""Words of the promises broken today (scale_support.check and sigterm_phase)."""
