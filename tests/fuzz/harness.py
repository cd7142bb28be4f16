"""Publish hostile messages among valid ones on every inbound subject and check the outcome.

Shared by the short e2e suite (tests/fuzz/test_inbound_fuzz.py) and the long run
(bench/fuzz_run.py). Everything is counted from what the servers hold: decisions and
dead letters from MongoDB, events from the streams (a core subscriber would also see
publishes JetStream's dedupe dropped), redeliveries from the consumers.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import bson
import nats
from hypothesis import strategies as st
from nats.js import JetStreamContext
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.settings import Settings
from contracts.invariants.model import Invariant, InvariantScope
from store.database import Document
from store.invariants import InvariantRepository
from tests.factories import decision, encode, headers, root, subject
from tests.fuzz.hostile import (
    Hostile,
    corpus,
    hostile_began,
    hostile_command,
    hostile_decision,
    request_body,
)

STREAMS = ("DECISIONS", "CORRECTIONS", "INVARIANTS")
DEAD_LETTER_BOUND = 256 * 1024
"""Largest dead-letter document accepted here: far under BSON's 16 MiB."""
EVENT_BOUND = 64 * 1024
"""Largest rejection event or dry-run reply accepted here: far under NATS's 1 MiB."""
NATS_MAX = 1024 * 1024 - 4096
"""What one publish may carry on a default nats-server, headers included."""


def payload_limit() -> int:
    """The recorder's MAX_PAYLOAD_BYTES default."""
    return Settings().max_payload_bytes


@dataclass
class Tally:
    sent_valid: int = 0
    valid_ids: set[str] = field(default_factory=set)
    hostile_ids: dict[str, str] = field(default_factory=dict)  # Nats-Msg-Id -> kind
    hostile_recorded: list[str] = field(default_factory=list)  # kinds of any recorded
    sent_hostile: Counter[str] = field(default_factory=Counter)
    stored_hostile: Counter[str] = field(default_factory=Counter)  # past JetStream's dedupe
    kinds: Counter[str] = field(default_factory=Counter)
    recorded: int = 0
    persisted_events: int = 0
    duplicates: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)
    rejection_events: int = 0
    redeliveries: int = 0
    pending: dict[str, tuple[int, int]] = field(default_factory=dict)
    dry_runs_answered: int = 0
    dry_runs_sent: int = 0
    corrections_valid: int = 0
    corrections_applied: int = 0
    largest_dead_letter: int = 0
    largest_event: int = 0

    def table(self) -> str:
        rows = [
            ("sent valid decisions", self.sent_valid),
            ("sent hostile (all subjects)", sum(self.sent_hostile.values())),
            ("  stored by JetStream", sum(self.stored_hostile.values())),
            *((f"    {fam}", n) for fam, n in sorted(self.stored_hostile.items())),
            ("recorded decisions", self.recorded),
            ("persisted events", self.persisted_events),
            ("duplicates", self.duplicates),
            ("dead-lettered", sum(self.dead_letters.values())),
            *((f"    {s}", n) for s, n in sorted(self.dead_letters.items())),
            ("rejection events (decisions)", self.rejection_events),
            ("redeliveries", self.redeliveries),
            ("dry runs answered / sent", f"{self.dry_runs_answered} / {self.dry_runs_sent}"),
            ("valid corrections applied / sent",
             f"{self.corrections_applied} / {self.corrections_valid}"),
            ("largest dead letter (bytes)", self.largest_dead_letter),
            ("largest event or reply (bytes)", self.largest_event),
            ("consumers still pending", sum(p + a for p, a in self.pending.values())),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


@dataclass
class Plans:
    roots: list[dict[str, Any]]
    other_plan: tuple[str, str]  # a plan and one of its decisions, for cross-plan IDs


async def _publish(js: JetStreamContext, h: Hostile, tally: Tally) -> None:
    tally.sent_hostile[h.family] += 1
    tally.kinds[f"{h.family}:{h.kind}"] += 1
    ack = await js.publish(h.subject, h.data, headers=h.headers or None)
    if not ack.duplicate:
        tally.stored_hostile[h.family] += 1
        if h.family == "decisions" and "Nats-Msg-Id" in h.headers:
            tally.hostile_ids[h.headers["Nats-Msg-Id"].upper()] = h.kind


CHECKS = ('!(tool.name == "shell" && tool.arguments.cmd.contains("rm -rf"))',
          'size(path) < 10000 && !paths.exists(p, p.startsWith("/"))')
"""Checked invariants in force during a run: every valid decision keeps them, every
decision (hostile ones that pass the other rules too) is evaluated."""


async def setup_plans(js: JetStreamContext, db: AsyncDatabase[Document], n_plans: int) -> Plans:
    for i, check in enumerate(CHECKS):
        await InvariantRepository(db).add(Invariant(name=f"fuzz-{i}", description="fuzz",
                                                    scope=InvariantScope.GLOBAL, check=check))
    roots = [root() for _ in range(n_plans + 1)]
    for r in roots:
        await js.publish(subject(r), encode(r), headers=headers(r))
    await wait_until(lambda: db["decisions"].count_documents({}), len(roots), 60)
    other = roots.pop()
    return Plans(roots, (other["plan_id"], other["decision_id"]))


async def wait_until(count: Any, expected: int, timeout: float) -> int:
    deadline = asyncio.get_running_loop().time() + timeout
    n = 0
    while asyncio.get_running_loop().time() < deadline:
        n = await count()
        if n >= expected:
            return n
        await asyncio.sleep(0.2)
    return n


async def run(nc: nats.NATS, db: AsyncDatabase[Document], *, rounds: int, per_round: int,
              n_plans: int = 5, seed: int | None = None, drain_timeout: float = 90.0) -> Tally:
    """`rounds` rounds; each publishes `per_round` valid decisions per plan mixed with
    hostile messages on every subject, plus valid append requests and hostile dry runs."""
    js = nc.jetstream()
    tally = Tally()
    plans = await setup_plans(js, db, n_plans)
    tally.sent_valid = len(plans.roots) + 1
    tally.valid_ids = {r["decision_id"] for r in plans.roots} | {plans.other_plan[1]}
    rng = random.Random(seed or 0)
    limit = payload_limit()
    parents: dict[str, list[str]] = {r["plan_id"]: [r["decision_id"]] for r in plans.roots}
    other_plan_id = plans.other_plan[0]
    valid_requests: list[str] = []

    for rnd in range(rounds):
        r = plans.roots[rnd % len(plans.roots)]
        plan_id = r["plan_id"]
        round_seed = None if seed is None else seed * 1000 + rnd
        hostile: list[Hostile] = []
        hostile += corpus(hostile_decision(plan_id, r["decision_id"], plans.other_plan, limit),
                          per_round, seed=round_seed)
        for fam in ("requests", "cancels", "fails", "retries", "violations", "templates",
                    "verdicts"):
            hostile += corpus(hostile_command(fam, plan_id, other_plan_id),
                              max(2, per_round // 3), seed=round_seed)
        hostile += corpus(hostile_began(plan_id), 2, seed=round_seed)
        valid: list[dict[str, Any]] = []
        for pr in plans.roots:
            for _ in range(per_round):
                p = pr["plan_id"]
                d = decision(p, rng.choice(parents[p]), "implementation_choice")
                parents[p].append(d["decision_id"])
                valid.append(d)
        # Valid and hostile interleaved, so they share pulled batches.
        mixed: list[dict[str, Any] | Hostile] = [*valid, *hostile]
        rng.shuffle(mixed)
        # Parents before children among the valid ones keeps the run free of waits.
        order = iter(valid)
        for item in mixed:
            if isinstance(item, Hostile):
                await _publish(js, item, tally)
            else:
                d = next(order)
                ack = await js.publish(subject(d), encode(d), headers=headers(d))
                assert not ack.duplicate
                tally.sent_valid += 1
                tally.valid_ids.add(d["decision_id"])
        # A valid append on a decision recorded in an earlier round.
        if rnd > 0:
            target = parents[plan_id][1]
            body = request_body(plan_id, target)
            await js.publish(f"corrections.requested.{plan_id}", json.dumps(body).encode(),
                             headers={"Nats-Msg-Id": body["correction_id"]})
            valid_requests.append(body["correction_id"])
        await _dry_runs(nc, corpus(hostile_command("dryrun", plan_id, other_plan_id), 3,
                                   seed=round_seed), tally)

    tally.corrections_valid = len(valid_requests)
    await settle(nc, db, tally, drain_timeout)
    tally.corrections_applied = await db["corrections"].count_documents(
        {"_id": {"$in": valid_requests}, "status": "applied"})
    return tally


async def _dry_runs(nc: nats.NATS, hostile: list[Hostile], tally: Tally) -> None:
    """Hostile dry runs: each must be answered, whatever it carries."""
    for h in hostile:
        tally.dry_runs_sent += 1
        tally.kinds[f"dryrun:{h.kind}"] += 1
        try:
            reply = await nc.request(h.subject, h.data, timeout=10, headers=h.headers)
        except (TimeoutError, nats.errors.TimeoutError, nats.errors.NoRespondersError):
            continue
        tally.largest_event = max(tally.largest_event, len(reply.data))
        if isinstance(json.loads(reply.data), dict):
            tally.dry_runs_answered += 1


async def settle(nc: nats.NATS, db: AsyncDatabase[Document], tally: Tally,
                 timeout: float) -> None:
    """Wait until every consumer has drained, then count what the servers hold."""
    js = nc.jetstream()
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        tally.pending = await consumer_backlog(js)
        busy = any(p or a for p, a in tally.pending.values())
        if not busy or asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.5)
    await asyncio.sleep(1.0)  # the last events' publishes
    ids = sorted(tally.valid_ids)
    tally.recorded = 0
    for i in range(0, len(ids), 5000):
        tally.recorded += await db["decisions"].count_documents({"_id": {"$in": ids[i:i + 5000]}})
    # A hostile decision recorded would be a strategy that built a valid one by accident,
    # or a rule that let a bad one through: named by kind, so either can be fixed.
    async for d in db["decisions"].find({"_id": {"$in": list(tally.hostile_ids)}}, {"_id": 1}):
        tally.hostile_recorded.append(tally.hostile_ids[d["_id"]])
    async for dl in db["dead_letters"].find():
        tally.dead_letters[family_of(str(dl.get("subject", "")))] += 1
        tally.largest_dead_letter = max(tally.largest_dead_letter, len(bson.encode(dl)))
    persisted = await stream_bodies(js, "decisions.persisted.>")
    seen = Counter(b.get("decision_id") for b, _ in persisted if isinstance(b, dict))
    real = {k: n for k, n in seen.items() if k in tally.valid_ids}
    tally.persisted_events = sum(real.values())
    tally.duplicates = sum(n - 1 for n in real.values() if n > 1)
    rejected = await stream_bodies(js, "decisions.rejected.>")
    tally.rejection_events = len(rejected)
    for _, size in rejected:
        tally.largest_event = max(tally.largest_event, size)
    for _, size in await stream_bodies(js, "corrections.rejected.>") + \
            await stream_bodies(js, "invariants.rejected.>"):
        tally.largest_event = max(tally.largest_event, size)
    tally.redeliveries = await redeliveries(js)


FAMILIES = {"decisions.recorded.": "decisions", "corrections.requested.": "requests",
            "corrections.cancel.": "cancels", "corrections.fail.": "fails",
            "corrections.retry.": "retries", "invariants.violations.": "violations",
            "invariants.templates.": "templates", "invariants.verdicts.": "verdicts",
            "decisions.began.": "began"}


def family_of(subject: str) -> str:
    return next((fam for prefix, fam in FAMILIES.items() if subject.startswith(prefix)),
                "other")


async def consumer_backlog(js: JetStreamContext) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for stream in STREAMS:
        for info in await js.consumers_info(stream):
            out[f"{stream}/{info.name}"] = (info.num_pending or 0, info.num_ack_pending or 0)
    return out


async def redeliveries(js: JetStreamContext) -> int:
    """Deliveries beyond the first, over every durable: delivered minus distinct messages."""
    total = 0
    for stream in STREAMS:
        for info in await js.consumers_info(stream):
            flt = info.config.filter_subject
            if not flt or info.delivered is None:
                continue
            state = (await js.stream_info(stream, subjects_filter=flt)).state
            matching = sum((state.subjects or {}).values())
            total += max(0, info.delivered.consumer_seq - matching)
    return total


async def stream_bodies(js: JetStreamContext, filter_subject: str
                        ) -> list[tuple[Any, int]]:
    """Every message the stream holds on the filter: its parsed body (or None) and size."""
    sub = await js.subscribe(filter_subject, ordered_consumer=True)
    out: list[tuple[Any, int]] = []
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=1.0)
            except (TimeoutError, nats.errors.TimeoutError):
                break
            try:
                body = json.loads(msg.data)
            except (ValueError, RecursionError):  # our own hostile bodies are in there too
                body = None
            out.append((body, len(msg.data)))
    finally:
        await sub.unsubscribe()
    return out


def check(tally: Tally, *, workers_alive: bool) -> list[str]:
    """Every promise of ADR 0011, as a list of what was broken (empty: all held)."""
    broken = []
    if not workers_alive:
        broken.append("the worker died")
    broken += _recording_broken(tally)
    if tally.largest_dead_letter > DEAD_LETTER_BOUND:
        broken.append(f"a dead letter of {tally.largest_dead_letter} bytes")
    if tally.largest_event > EVENT_BOUND:
        broken.append(f"an event or reply of {tally.largest_event} bytes")
    if tally.dry_runs_answered != tally.dry_runs_sent:
        broken.append(f"{tally.dry_runs_answered} of {tally.dry_runs_sent} dry runs answered")
    if tally.corrections_applied != tally.corrections_valid:
        broken.append(f"{tally.corrections_applied} of {tally.corrections_valid} valid "
                      "corrections applied")
    stuck = {k: v for k, v in tally.pending.items() if any(v)}
    if stuck:
        broken.append(f"consumers not drained: {stuck}")
    return broken


def _recording_broken(tally: Tally) -> list[str]:
    """What became of the decisions and the hostile bodies: valid ones recorded once each,
    every hostile one dead-lettered (and a decision's reported), none recorded."""
    broken = []
    if tally.recorded != tally.sent_valid:
        broken.append(f"recorded {tally.recorded} of {tally.sent_valid} valid decisions")
    if tally.persisted_events != tally.sent_valid or tally.duplicates:
        broken.append(f"{tally.persisted_events} persisted events for {tally.sent_valid} "
                      f"decisions, {tally.duplicates} duplicates")
    for fam in ("decisions", "requests", "cancels", "fails", "retries", "violations",
                "verdicts"):
        n = tally.stored_hostile[fam]
        if tally.dead_letters[fam] != n:
            broken.append(f"{tally.dead_letters[fam]} dead letters of {fam}, expected {n}")
    if tally.rejection_events != tally.stored_hostile["decisions"]:
        broken.append(f"{tally.rejection_events} decision rejection events, "
                      f"expected {tally.stored_hostile['decisions']}")
    if tally.hostile_recorded:
        broken.append(f"hostile decisions recorded, by kind: {sorted(tally.hostile_recorded)}")
    return broken


__all__ = ["Tally", "check", "run", "st"]
