"""The partitioned recorder under faults: workers share the recorder's partitions while
agents record and an operator corrects; workers are SIGKILLed, stopped gracefully and
join again; after each fault, how long until every partition is recorded again, spread
evenly over the live workers (printed); and, from the workers' own log lines, that no
partition (so no plan: a plan is always in one) was recorded by two workers at once.

Shared by the `cluster` test (tests/integration/test_scale_faults.py) and the script
(bench/partition_fault_run.py), which runs it bigger. The stack and the counts are
scale_support's: every acknowledged decision recorded once, announced once, sequence
numbers dense, one terminal event per correction.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import re
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.subjects import RECORDED_PREFIX, RECORDER_DURABLE
from contracts.shared.partitions import partitions as partition_list
from store.database import PLAN_LOCKS, WORKERS, Document
from tests.integration.scale_support import (
    Fault,
    Report,
    Size,
    Stack,
    Tally,
    loaded,
    start_worker,
)

STALL_SECONDS = 8.0
"""How long the stall fault freezes a worker: past its leases (RECORDER_LEASE_SECONDS,
5 s) and its registration (WORKER_LEASE_SECONDS, 5 s), so the others take over."""
HOLDING = re.compile(r"this replica (took|let go of) (role:\S+)(?: \(([^)]*)\))?")
FENCED_ENDS = ("lease lost", "lease expired")
"""Why a replica let go of a partition when its lease had run out first: it may have
held on (by its log) after another took over, but its writes were fenced by the lease
(workers.leading), so no batch of its committed then; counted, not an overlap."""
REFUSED = "was not written"
"""The recorder's line for a batch its lease's fence refused (workers.recorder)."""


def now() -> datetime:
    return datetime.now(UTC)


async def spread(db: AsyncDatabase[Document], stack: Stack) -> dict[int, list[str]] | None:
    """Which worker (by index) holds which partition's lease now; None while a partition
    is free or held by a process that is not running."""
    at = now()
    owners = {d["_id"]: d["owner"] async for d in db[PLAN_LOCKS].find(
        {"_id": {"$regex": "^role:recorder"}, "expires_at": {"$gte": at}})}
    pids = {d["_id"]: d.get("pid") async for d in db[WORKERS].find({}, {"pid": 1})}
    index = {w.proc.pid: i for i, w in enumerate(stack.workers)
             if w.proc is not None and w.alive}
    out: dict[int, list[str]] = {}
    for p in partition_list(RECORDED_PREFIX, RECORDER_DURABLE, stack.partitions):
        i = index.get(pids.get(owners.get(p.lease)))
        if i is None:
            return None
        out.setdefault(i, []).append(p.durable)
    return out


def even(held: dict[int, list[str]], live: int) -> bool:
    counts = [len(v) for v in held.values()]
    return len(held) == live and max(counts) - min(counts) <= 1


def shown(held: dict[int, list[str]]) -> str:
    return ", ".join(f"worker {i}: {len(v)} ({' '.join(x.rsplit('-', 1)[-1] for x in v)})"
                     for i, v in sorted(held.items()))


async def rebalanced(db: AsyncDatabase[Document], stack: Stack, timeout: float = 90.0
                     ) -> tuple[float, dict[int, list[str]] | None]:
    """Seconds until every partition is held by a running worker, evenly."""
    started = time.monotonic()
    held = None
    while time.monotonic() - started < timeout:
        held = await spread(db, stack)
        if held is not None and even(held, sum(w.alive for w in stack.workers)):
            return time.monotonic() - started, held
        await asyncio.sleep(0.1)
    return timeout, held


@dataclass
class Faults:
    """What the run did to the workers: when each process index was killed."""

    kills: dict[int, list[datetime]] = field(default_factory=dict)
    moves: list[float] = field(default_factory=list)
    """Seconds each fault took to be spread again."""


async def _note(report: Report, faults: Faults, db: AsyncDatabase[Document], stack: Stack,
                started: float, what: str, extra: str = "") -> None:
    at = time.monotonic() - started
    seconds, held = await rebalanced(db, stack)
    faults.moves.append(seconds)
    where = shown(held) if held else "NOT spread"
    report.faults.append(Fault(at, what, f"{extra}every partition recorded again, evenly, "
                                         f"after {seconds:.1f} s: {where}"))
    if held is None:
        report.problems.append(f"after {what}: partitions not spread again in 90 s")


async def partition_faults(stack: Stack, db: AsyncDatabase[Document], rng: random.Random,
                           rounds: int, report: Report, faults: Faults,
                           started: float) -> None:
    """First one worker is frozen past its leases and resumed; then each round: SIGKILL
    a worker, start it again (it joins); SIGTERM another, start it again. After each,
    until the partitions are spread again."""
    ws = stack.workers
    first = rng.randrange(len(ws))
    await asyncio.sleep(rng.uniform(0.5, 1.5))
    # A stall: the process is frozen past its leases with whatever it had in hand (a
    # paused VM, a starved host), the others take its partitions, then it wakes up
    # unaware: its renewals and any batch it still writes find the leases another's.
    stalled = (first + rounds) % len(ws)
    proc = ws[stalled].proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)
    await asyncio.sleep(STALL_SECONDS)
    os.kill(proc.pid, signal.SIGCONT)
    await _note(report, faults, db, stack, started,
                f"worker {stalled} frozen {STALL_SECONDS:g} s (SIGSTOP), then resumed")
    for r in range(rounds):
        await asyncio.sleep(rng.uniform(0.5, 1.5))
        victim = (first + r) % len(ws)
        ws[victim].kill()
        faults.kills.setdefault(victim, []).append(now())
        await _note(report, faults, db, stack, started, f"SIGKILL worker {victim}")
        await start_worker(ws[victim], stack.cluster)
        await _note(report, faults, db, stack, started, f"worker {victim} joins")
        other = (victim + 1) % len(ws)
        code = await asyncio.to_thread(ws[other].stop)
        if code != 0:
            report.problems.append(f"the SIGTERM'd worker {other} exited {code}")
        await _note(report, faults, db, stack, started, f"SIGTERM worker {other}",
                    f"exit {code}; ")
        await start_worker(ws[other], stack.cluster)
        await _note(report, faults, db, stack, started, f"worker {other} joins")


@dataclass(frozen=True)
class Holding:
    lease: str
    process: str
    start: datetime
    end: datetime
    fenced: bool = False
    """It ended because its lease had run out (FENCED_ENDS)."""


def holdings(index: int, log: Path, kills: Iterable[datetime], end: datetime) -> list[Holding]:
    """From one worker slot's log (every process started in it): each time a process held
    a partition, from the line before it pulled to the line after it settled; a process
    killed while holding one held it until the kill."""
    opened: dict[tuple[str, str], datetime] = {}
    out: list[Holding] = []
    deaths = sorted(kills)
    for line in log.read_text(errors="replace").splitlines():
        try:
            entry: dict[str, Any] = json.loads(line)
        except ValueError:
            continue
        found = HOLDING.search(str(entry.get("message", "")))
        if not found:
            continue
        key = (found.group(2), f"{index}:{entry.get('worker_id')}")
        at = datetime.fromisoformat(str(entry["time"]).replace("Z", "+00:00"))
        if found.group(1) == "took":
            opened[key] = at
        elif key in opened:
            out.append(Holding(key[0], key[1], opened.pop(key), at,
                               (found.group(3) or "") in FENCED_ENDS))
    for (lease, process), began in opened.items():
        died = next((k for k in deaths if k >= began), end)
        out.append(Holding(lease, process, began, died))
    return out


def overlaps(all_: list[Holding]) -> list[str]:
    """Partitions two processes held at the same time, but for a holder that held on
    past its lease (its writes fenced: FENCED_ENDS)."""
    found = []
    by_lease: dict[str, list[Holding]] = {}
    for h in all_:
        by_lease.setdefault(h.lease, []).append(h)
    for lease, hs in by_lease.items():
        hs.sort(key=lambda h: h.start)
        for a, b in itertools.pairwise(hs):
            if b.start < a.end and not a.fenced:
                found.append(f"{lease}: {a.process} until {a.end:%H:%M:%S.%f}, "
                             f"{b.process} from {b.start:%H:%M:%S.%f}")
    return found


async def partition_fault_run(base: Path, mongo_uri: str, db: AsyncDatabase[Document],
                              db_name: str, size: Size, *, workers: int = 3,
                              partitions: int = 6, rounds: int = 2) -> Report:
    """`workers` processes sharing `partitions` partitions under `rounds` rounds of a
    SIGKILL, a graceful stop and two joins, while the load flows."""
    rng = random.Random(size.seed)
    tally = Tally()
    report = Report(f"Partitioned recording fault run: {size.decisions} decisions, "
                    f"{size.agents} agents, {workers} workers, {partitions} partitions, "
                    f"a stall, {rounds} rounds of SIGKILL + SIGTERM + joins, seed {size.seed}",
                    tally)
    stack = await Stack.start(base, mongo_uri, db_name, workers, partitions=partitions)
    faults = Faults()
    try:
        seconds, held = await rebalanced(db, stack)
        report.notes.append(f"at start: spread after {seconds:.1f} s: "
                            f"{shown(held) if held else 'NOT spread'}")
        await loaded(stack.cluster, stack.client, db, size, tally, rng, report,
                     lambda load, started: partition_faults(stack, db, rng, rounds, report,
                                                            faults, started),
                     partitions)
        end = now()
        found = [h for i, w in enumerate(stack.workers)
                 for h in holdings(i, w.log_path, faults.kills.get(i, []), end)]
        twice = overlaps(found)
        report.counts["partitions held by two at once"] = len(twice)
        report.counts["partition holdings seen"] = len(found)
        report.counts["  ended by a lost lease (writes fenced)"] = sum(
            h.fenced for h in found)
        report.counts["batches refused by a lease's fence"] = sum(
            w.log_path.read_text(errors="replace").count(REFUSED) for w in stack.workers)
        if faults.moves:
            report.counts["spread again after a fault (s)"] = (
                f"median {sorted(faults.moves)[len(faults.moves) // 2]:.1f}, "
                f"max {max(faults.moves):.1f}")
        if twice:
            report.problems.append(f"{len(twice)} partitions recorded by two workers at "
                                   f"once: {twice[:3]}")
        if not found:
            report.problems.append("no partition holding found in the workers' logs")
    finally:
        await stack.stop()
    return report

