"""Scale-out under faults (docs/operations.md, Fault runs at scale), smaller than the
scripts run them (bench/cluster_fault_run.py, bench/workers_fault_run.py print the same
table).

Marker `cluster`: three nats-server processes, secantusd-py, several worker processes
and the load run for a minute or two each on 2 cores; left out of `scripts/test` and
of `-m slow`, run one at a time by `.ci/run` (`scripts/test -m cluster -n 0`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from store.database import Document
from tests.integration.partition_faults import partition_fault_run
from tests.integration.scale_support import (
    Size,
    cluster_fault_run,
    curve_table,
    throughput_curve,
    workers_fault_run,
)

pytestmark = [pytest.mark.cluster, pytest.mark.e2e]


async def test_cluster_loses_the_stream_leader_and_another_node_under_load(
        mongo_uri: str, db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    """kill -9 of the DECISIONS leader, restart, then of the CORRECTIONS leader (or a
    follower), while agents publish and an operator corrects: every acknowledged
    decision recorded once, every correction with one terminal event.

    Two worker processes, both given every server URL (the next test kills workers)."""
    report = await cluster_fault_run(tmp_path, mongo_uri, db, db_name,
                                     Size(decisions=4000, agents=4, correction_plans=6,
                                          spacing=1.5, seed=7), workers=2)
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
    report, stack = await workers_fault_run(
        tmp_path, mongo_uri, db, db_name,
        Size(decisions=5000, agents=3, correction_plans=6, spacing=1.5, seed=11),
        workers=3, kills=4)
    try:
        print("\n" + report.table())
        assert len([f for f in report.faults if f.what.startswith("SIGKILL")]) >= 2
        curve = await throughput_curve(stack, db, burst=600, reps=1)
        print(curve_table(curve, 600, "test size, machine shared"))
    finally:
        await stack.stop()
    # Every promise: nothing lost or doubled, one terminal event each, per-plan
    # corrections one at a time in arrival order, no redelivery after the SIGTERM. (Two
    # or three workers used to lose thousands of decisions of deep trees, dead-lettered
    # as parent_exists, before the recorder became active/standby: workers/leading.py.)
    assert report.problems == []


async def test_three_workers_share_six_partitions_through_kills_stops_and_joins(
        mongo_uri: str, db: AsyncDatabase[Document], db_name: str, tmp_path: Path) -> None:
    """Three workers, six partitions: one worker frozen past its leases (SIGSTOP) and
    resumed, then a SIGKILL, a graceful stop and two joins, twice, while agents record and
    an operator corrects: nothing lost or doubled, every partition recorded again within
    seconds, evenly (printed), and no partition held by two workers at once (from their
    own log lines; a holder that held on past its lease counts apart, its writes fenced
    by the lease)."""
    report = await partition_fault_run(
        tmp_path, mongo_uri, db, db_name,
        Size(decisions=4000, agents=3, correction_plans=6, spacing=1.5, seed=26),
        workers=3, partitions=6, rounds=2)
    print("\n" + report.table())
    assert report.problems == []
    assert report.counts["recorded (MongoDB)"] == report.counts["acknowledged"]
    assert report.counts["partitions held by two at once"] == 0
    assert len([f for f in report.faults if f.what.startswith("SIGKILL")]) == 2
