"""Kill the worker, restart it at once, and time how long the interrupted work takes to finish.

Shared by the slow test (tests/integration/test_recovery.py) and the benchmark
(bench/bench_recovery.py, which runs at least 20 kills of each kind and prints p50
and max). Workers run with the default lease, ack wait and sweep settings: the
figures are what an operator would see.

- corrections: a worker with CORRECTIONS_CRASH_AT=<step> SIGKILLs itself at that
  step of a revert; a fresh worker is started at once; the time is from that start
  (the process being spawned) to the correction's terminal event.
- recording: a worker records a burst of decisions and is SIGKILLed at a random
  moment while the burst is in flight; it is restarted at once; the time is from the
  restart to the last persisted event of the burst.
Each run also checks that nothing was lost or doubled.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
from pymongo.asynchronous.database import AsyncDatabase

from store.database import Document
from tests.conftest import Workers, worker_env
from tests.factories import decision, encode, headers, root, subject
from tests.integration.correction_support import request, revert_scene
from tests.integration.wire import events

CRASH_STEPS = ["after_commit:pending", "after_commit:analyzing", "after_commit:executing",
               "before_execute_commit", "after_commit:applied", "after_publish:applied",
               "before_ack"]
TERMINAL = {"applied", "failed", "cancelled"}


@dataclass
class Timings:
    seconds: list[float] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, label: str, seconds: float) -> None:
        self.labels.append(label)
        self.seconds.append(seconds)

    @property
    def p50(self) -> float:
        return statistics.median(self.seconds) if self.seconds else float("nan")

    @property
    def max(self) -> float:
        return max(self.seconds) if self.seconds else float("nan")


def env(nats_url: str, mongo_uri: str, db_name: str, tmp_path: Path, **extra: str
        ) -> dict[str, str]:
    return worker_env(nats_url, mongo_uri, db_name, ARTIFACTS_ROOT=str(tmp_path / "artifacts"),
                      ARCHIVE_ROOT=str(tmp_path / "archive"), **extra)


async def _wait_dead(w: Workers, timeout: float = 30.0) -> bool:
    assert w.proc is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if w.proc.poll() is not None:
            return w.proc.returncode == -9
        await asyncio.sleep(0.02)
    return False


async def correction_kills(nats_url: str, mongo_uri: str, db_name: str,
                           db: AsyncDatabase[Document], nc: nats.NATS, tmp_path: Path,
                           steps: list[str], reps: int, timeout: float = 60.0) -> Timings:
    """For each step, `reps` times: a revert whose worker dies there, then a fresh worker."""
    (tmp_path / "artifacts").mkdir(exist_ok=True)
    out = Timings()
    js = nc.jetstream()
    n = 0
    for _ in range(reps):
        for step in steps:
            n += 1
            scene = await revert_scene(db, tmp_path / "artifacts")
            doomed = Workers(env(nats_url, mongo_uri, db_name, tmp_path,
                                 CORRECTIONS_CRASH_AT=step), tmp_path / f"doomed-{n}.log")
            await doomed.start(nats_url)
            terminal = asyncio.get_running_loop().create_future()

            async def on_event(msg: Any, fut: asyncio.Future[float] = terminal) -> None:
                body = json.loads(msg.data)
                if body.get("to_status") in TERMINAL and not fut.done():
                    fut.set_result(time.monotonic())

            sub = await nc.subscribe(f"corrections.events.{scene.plan_id}.*", cb=on_event)
            req = request(scene.plan_id, scene.target.decision_id)
            await js.publish(f"corrections.requested.{req.plan_id}",
                             req.model_dump_json().encode(),
                             headers={"Nats-Msg-Id": req.correction_id})
            if not await _wait_dead(doomed):
                out.problems.append(f"{step}: the worker did not die at the step")
                doomed.stop()
                await sub.unsubscribe()
                continue
            restarted = time.monotonic()
            survivor = Workers(env(nats_url, mongo_uri, db_name, tmp_path),
                               tmp_path / f"survivor-{n}.log")
            await survivor.start(nats_url)
            try:
                # A terminal event published by the doomed worker before it died (the
                # after_publish steps) counts as zero: nothing was left to recover.
                done_at = await asyncio.wait_for(terminal, timeout)
                out.add(step, max(0.0, done_at - restarted))
                out.problems += await check_correction(db, nc, req.correction_id,
                                                       scene.plan_id, scene.affected)
                # The survivor also settles what the dead one left unacked, so the next
                # doomed worker is not handed this request again.
                if not await _drained(js, "CORRECTIONS", "corrector", timeout):
                    out.problems.append(f"{step}: the request was never acked")
            except TimeoutError:
                out.problems.append(f"{step}: no terminal event {timeout}s after restart")
            finally:
                await sub.unsubscribe()
                survivor.stop()
    return out


async def _drained(js: Any, stream: str, durable: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = await js.consumer_info(stream, durable)
        if not info.num_pending and not info.num_ack_pending:
            return True
        await asyncio.sleep(0.1)
    return False


async def check_correction(db: AsyncDatabase[Document], nc: nats.NATS, correction_id: str,
                           plan_id: str, affected: list[str]) -> list[str]:
    """Applied all or nothing, each lifecycle event in the stream exactly once."""
    problems = []
    doc = await db.corrections.find_one({"_id": correction_id})
    assert doc is not None
    if doc["status"] != "applied":
        problems.append(f"{correction_id} ended {doc['status']}: {doc.get('error')}")
        return problems
    superseded = {d["_id"] async for d in db.decisions.find(
        {"_id": {"$in": affected}, "superseded_by": doc["new_decision_id"]})}
    if superseded != set(affected):
        problems.append(f"{correction_id}: {len(superseded)} of {len(affected)} superseded")
    replacements = await db.decisions.count_documents(
        {"plan_id": plan_id, "is_correction": True})
    if replacements != 1:
        problems.append(f"{correction_id}: {replacements} replacement decisions")
    evs = [b for _, b, _ in await events(nc, f"corrections.events.{plan_id}.*", 0.3)]
    statuses = [e["to_status"] for e in evs if e.get("correction_id") == correction_id]
    if statuses != [h["to_status"] for h in doc["history"]]:
        problems.append(f"{correction_id}: events {statuses} for history "
                        f"{[h['to_status'] for h in doc['history']]}")
    return problems


async def recording_kills(nats_url: str, mongo_uri: str, db_name: str,
                          db: AsyncDatabase[Document], nc: nats.NATS, tmp_path: Path,
                          kills: int, burst: int = 1000, plans: int = 5, seed: int = 0,
                          timeout: float = 60.0) -> Timings:
    """`kills` times: publish a burst, SIGKILL the worker mid-burst, restart it at once."""
    rng = random.Random(seed)
    out = Timings()
    js = nc.jetstream(publish_async_max_pending=20_000)
    roots = [root() for _ in range(plans)]
    parents = {r["plan_id"]: [r["decision_id"]] for r in roots}
    sent: list[dict[str, Any]] = []
    persisted_at: dict[str, float] = {}

    async def on_persisted(msg: Any) -> None:
        persisted_at.setdefault(json.loads(msg.data)["decision_id"], time.monotonic())

    sub = await nc.subscribe("decisions.persisted.>", cb=on_persisted)
    # The default parent wait: children of a dead worker's in-flight parents wait for them.
    w = Workers(env(nats_url, mongo_uri, db_name, tmp_path, RECORDER_PARENT_WAIT_SECONDS="60"),
                tmp_path / "recorder.log")
    await w.start(nats_url)
    try:
        await _publish(js, roots)
        sent += roots
        for k in range(kills):
            batch = []
            for i in range(burst):
                p = roots[i % plans]["plan_id"]
                d = decision(p, rng.choice(parents[p]), "implementation_choice")
                parents[p].append(d["decision_id"])
                batch.append(d)
            await _publish(js, batch)
            sent += batch
            await asyncio.sleep(rng.uniform(0.05, 0.6))
            w.kill()
            in_flight = sum(1 for d in sent if d["decision_id"] not in persisted_at)
            restarted = time.monotonic()
            await w.start(nats_url)
            deadline = restarted + timeout
            while time.monotonic() < deadline and len(persisted_at) < len(sent):  # noqa: ASYNC110 - polls a count fed by a callback
                await asyncio.sleep(0.05)
            if len(persisted_at) < len(sent):
                out.problems.append(f"kill {k}: {len(sent) - len(persisted_at)} decisions "
                                    f"not persisted {timeout}s after restart")
                continue
            last = max(persisted_at[d["decision_id"]] for d in batch)
            out.add(f"kill {k} ({in_flight} in flight)", max(0.0, last - restarted))
        out.problems += await check_recorded_once(db, nc, sent)
    finally:
        await sub.unsubscribe()
        w.stop()
    return out


async def _publish(js: Any, decisions: list[dict[str, Any]]) -> None:
    futures = [await js.publish_async(subject(d), encode(d), headers=headers(d))
               for d in decisions]
    await asyncio.gather(*futures)


async def check_recorded_once(db: AsyncDatabase[Document], nc: nats.NATS,
                              sent: list[dict[str, Any]]) -> list[str]:
    problems = []
    stored = await db.decisions.count_documents({})
    if stored != len(sent):
        problems.append(f"{stored} decisions stored for {len(sent)} sent")
    per_plan: dict[str, list[int]] = {}
    async for d in db.decisions.find({}, {"plan_id": 1, "sequence_number": 1}):
        per_plan.setdefault(d["plan_id"], []).append(d["sequence_number"])
    for plan, seqs in per_plan.items():
        if sorted(seqs) != list(range(len(seqs))):
            problems.append(f"plan {plan}: sequence numbers not dense")
    evs = await events(nc, "decisions.persisted.>", 2.0)
    counts = Counter(ev["decision_id"] for _, ev, _ in evs)
    if len(counts) != len(sent) or (counts and max(counts.values()) != 1):
        problems.append(f"{len(evs)} persisted events for {len(counts)} decisions "
                        f"({len(sent)} sent)")
    return problems


def table(title: str, t: Timings) -> str:
    rows = [f"{title}: {len(t.seconds)} kills, p50 {t.p50:.2f} s, max {t.max:.2f} s"]
    by_label: dict[str, list[float]] = {}
    for label, s in zip(t.labels, t.seconds, strict=True):
        by_label.setdefault(label.split(" (")[0] if "kill" not in label else "recording",
                            []).append(s)
    for label, secs in by_label.items():
        rows.append(f"  {label:<28} n={len(secs):<3} p50 {statistics.median(secs):6.2f} s"
                    f"   max {max(secs):6.2f} s")
    rows += [f"  PROBLEM: {p}" for p in t.problems]
    return "\n".join(rows)
