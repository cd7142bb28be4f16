"""Fault runs at scale-out: a 3-node JetStream cluster, several worker processes, a load
of decisions from several agents and a stream of corrections, and the counts that say
whether every promise held.

Shared by the `cluster` tests (tests/integration/test_scale_faults.py) and the scripts
(bench/cluster_fault_run.py, bench/workers_fault_run.py), which run it bigger and print
the same table. Everything is counted from what the servers hold: MongoDB, and the
streams read back with ordered consumers (never a core subscriber, which misses what
was published while it was away).

- The stack: three nats-server processes from deploy/nats-server.conf unedited (R3
  streams under STREAM_PROFILE=production, `sync_interval: always`, the four roles of
  deploy/nats-auth.conf), one secantusd-py, `python -m workers` processes given every
  server URL.
- The load: `agents` clients (DecisionRecorder, the agent's user) each growing its own
  plans, publishing one decision at a time and waiting for its PubAck (the client
  retries for about 15 s; what still fails is counted as not acknowledged, never
  dropped from the count); an operator client (CorrectionClient, the operator's user)
  requesting reverts, appends and cancels on plans recorded beforehand, spread over
  the run.
- The checks: every acknowledged decision is in MongoDB, stored once in the stream
  and announced once on `decisions.persisted.*`, sequence numbers dense per plan;
  every correction requested ends with exactly one terminal event in the stream and a
  terminal status in MongoDB; per plan, corrections never ran at the same time and ran
  in arrival order (from the stored history).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import signal
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import nats
import nats.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError, ServiceUnavailableError
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.setting_types import StreamProfile
from bootstrap.settings import Settings
from clients._connect import connect_bounded
from clients._publish import PublishFailed
from clients.building import build_child, build_root, wire_message
from clients.credentials import NatsCredentials
from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from contracts.decisions.model import Decision
from contracts.decisions.subjects import DECISIONS_STREAM, RECORDED_PREFIX, RECORDER_DURABLE
from contracts.decisions.types import DecisionType
from contracts.shared.ids import MSG_ID_HEADER
from contracts.shared.partitions import partitions as partition_list
from deploy.embedded import ManagedServer, free_port, start_nats_with_config
from store.database import Document
from tests.conftest import Workers, worker_env
from tests.integration.access_support import ROLES, password
from tests.integration.test_nats_cluster_config import DEFAULTS, TEMPLATE, env_file, until_streams
from workers.stream_config import StreamLimits

CORRECTIONS_STREAM = "CORRECTIONS"
TERMINAL = ("applied", "failed", "cancelled")
CONTEXT = "the agent's context window"
RETRYABLE_INFO = (ServiceUnavailableError, nats.errors.TimeoutError, TimeoutError,
                  nats.errors.NoRespondersError, nats.errors.ConnectionReconnectingError)


def creds(role: str) -> NatsCredentials:
    return NatsCredentials(user=role, password=password(role))


# --- the stack ----------------------------------------------------------------------------


@dataclass
class Node:
    """One nats-server of the cluster; kept so it can be killed and started again on the
    same ports and store."""

    name: str
    port: int
    env: dict[str, str]
    log: Path
    server: ManagedServer | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.server = start_nats_with_config(TEMPLATE, self.env, self.log, port=self.port)

    def kill(self) -> None:
        """kill -9: no shutdown, no flush beyond what `sync_interval: always` did."""
        assert self.server is not None
        self.server.process.send_signal(signal.SIGKILL)
        self.server.process.wait()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


@dataclass
class Cluster:
    nodes: list[Node]

    @classmethod
    def start(cls, base: Path, size: int = 3) -> Cluster:
        defaults = env_file(DEFAULTS)
        ports = [(free_port(), free_port(), free_port()) for _ in range(size)]
        route_password = "route-" + password("route")
        routes = ", ".join(f"nats://route:{route_password}@127.0.0.1:{route}"
                           for _, route, _ in ports)
        nodes = []
        for i, (client, route, http) in enumerate(ports, start=1):
            env = {**defaults, "NATS_SERVER_NAME": f"ledger-nats-{i}",
                   "NATS_LISTEN": f"127.0.0.1:{client}",
                   "NATS_CLUSTER_LISTEN": f"127.0.0.1:{route}",
                   "NATS_HTTP": f"127.0.0.1:{http}",
                   "NATS_STORE_DIR": str(base / f"n{i}"),
                   "NATS_CLUSTER_ROUTES": f"[{routes}]",
                   "NATS_ROUTE_PASSWORD": route_password,
                   **{f"LEDGER_{r.upper()}_PASSWORD": password(r) for r in ROLES}}
            nodes.append(Node(f"ledger-nats-{i}", client, env, base / f"n{i}.log"))
        cluster = cls(nodes)
        try:
            for node in nodes:
                node.start()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    @property
    def url(self) -> str:
        """NATS_URL as the workers and clients get it: every server, comma-separated."""
        return ",".join(n.url for n in self.nodes)

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def live_url(self, role: str = "worker") -> str:
        """One running server with the role's password in it (for tools that take one URL)."""
        node = next(n for n in self.nodes
                    if n.server is not None and n.server.process.poll() is None)
        return f"nats://{role}:{password(role)}@127.0.0.1:{node.port}"

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


async def retrying(call: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
    """A JetStream API call retried while the cluster elects (503, timeouts), bounded."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await call()
        except RETRYABLE_INFO:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def leader_of(js: JetStreamContext, stream: str) -> str | None:
    try:
        info = await js.stream_info(stream)
    except RETRYABLE_INFO:
        return None
    return info.cluster.leader if info.cluster else None


async def wait_new_leader(js: JetStreamContext, stream: str, old: str,
                          timeout: float = 60.0) -> tuple[str | None, float]:
    """The stream's next leader and how long after now it was known (None on timeout)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        leader = await leader_of(js, stream)
        if leader and leader != old:
            return leader, time.monotonic() - started
        await asyncio.sleep(0.05)
    return None, time.monotonic() - started


async def wait_current(js: JetStreamContext, streams: Iterable[str],
                       timeout: float = 60.0) -> float:
    """Seconds until every replica of every stream is current again (a restarted node
    caught up with its leader); the timeout if never."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        ok = True
        for stream in streams:
            try:
                info = await js.stream_info(stream)
            except RETRYABLE_INFO:
                ok = False
                break
            replicas = (info.cluster.replicas or []) if info.cluster else []
            if not info.cluster or not info.cluster.leader or len(replicas) < 2 or \
                    not all(r.current and not r.offline for r in replicas):
                ok = False
                break
        if ok:
            return time.monotonic() - started
        await asyncio.sleep(0.2)
    return timeout


@dataclass
class Fault:
    """One thing done to the stack, and what it cost."""

    at: float
    what: str
    detail: str = ""

    def row(self) -> str:
        return f"  t={self.at:6.1f} s  {self.what}{'  ' + self.detail if self.detail else ''}"


def workers_env(cluster_url: str, mongo_uri: str, db_name: str, base: Path,
                **extra: str) -> dict[str, str]:
    (base / "artifacts").mkdir(parents=True, exist_ok=True)
    return worker_env(cluster_url, mongo_uri, db_name,
                      NATS_USER="worker", NATS_PASSWORD=password("worker"),
                      STREAM_PROFILE="production", STREAM_MAX_BYTES=str(512 * 1024**2),
                      # The session's MongoDB has no users (NATS has: NATS_USER above).
                      ALLOW_UNAUTHENTICATED="1",
                      ARTIFACTS_ROOT=str(base / "artifacts"),
                      ARCHIVE_ROOT=str(base / "archive"),
                      # Children of a killed worker's in-flight parents wait for them.
                      RECORDER_PARENT_WAIT_SECONDS="120", **extra)


# --- the load -----------------------------------------------------------------------------


@dataclass
class Tally:
    """What the clients sent and what the stream acknowledged."""

    sent: dict[str, str] = field(default_factory=dict)  # decision_id -> plan_id
    acked: set[str] = field(default_factory=set)
    unacked: set[str] = field(default_factory=set)
    corrections: dict[str, str] = field(default_factory=dict)  # correction_id -> plan_id
    corrections_unacked: set[str] = field(default_factory=set)
    cancels: int = 0
    cancels_unacked: int = 0
    load_plans: set[str] = field(default_factory=set)
    correction_plans: set[str] = field(default_factory=set)

    @property
    def progress(self) -> int:
        return len(self.acked) + len(self.unacked)


async def publish_counted(rec: DecisionRecorder, d: Decision, tally: Tally) -> bool:
    tally.sent[d.decision_id] = d.plan_id
    try:
        await rec.publish(d)
    except PublishFailed:
        tally.unacked.add(d.decision_id)
        return False
    tally.acked.add(d.decision_id)
    return True


async def agent(url: str, n: int, plans: int, rng: random.Random, tally: Tally) -> None:
    """One agent: `plans` plans, `n` decisions in all (roots included), each child under
    a random acknowledged decision of its plan, one PubAck awaited at a time."""
    async with DecisionRecorder.connect(url, credentials=creds("agent")) as rec:
        trees: list[list[Decision]] = []
        for _ in range(plans):
            r = build_root("Ship the rate limiter", context=CONTEXT)
            tally.load_plans.add(r.plan_id)
            if await publish_counted(rec, r, tally):
                trees.append([r])
        for i in range(n - plans):
            if not trees:
                return
            tree = trees[i % len(trees)]
            parent = tree[-1 - rng.randrange(min(len(tree), 20))]
            d = build_child(parent, DecisionType.IMPLEMENTATION_CHOICE, question=f"Step {i}?",
                            chosen_option="the token bucket", context=CONTEXT)
            if await publish_counted(rec, d, tally):
                tree.append(d)


@dataclass
class CorrectionPlan:
    """root -> a -> b1..b4, each b_i -> c_i: ten decisions, and the corrections asked
    of them in this order: revert b1, append to c2, revert b3 and cancel it at once,
    revert c1 (superseded by the first: FAILED), revert b4."""

    decisions: list[Decision]

    @classmethod
    def build(cls) -> CorrectionPlan:
        r = build_root("Add rate limiting to the public API", context=CONTEXT)
        a = build_child(r, DecisionType.STRATEGY_CHOICE, question="Where?",
                        chosen_option="at the gateway", context=CONTEXT)
        bs = [build_child(a, DecisionType.IMPLEMENTATION_CHOICE, question=f"b{i}?",
                          chosen_option=f"option {i}", context=CONTEXT) for i in range(4)]
        cs = [build_child(b, DecisionType.TOOL_INVOCATION, question=f"c{i}?",
                          chosen_option="run it", context=CONTEXT) for i, b in enumerate(bs)]
        return cls([r, a, *bs, *cs])

    @property
    def plan_id(self) -> str:
        return self.decisions[0].plan_id

    def step(self, i: int) -> tuple[str, str, bool]:
        """(mode, target decision_id, cancel at once) of the i-th correction."""
        b, c = self.decisions[2:6], self.decisions[6:10]
        steps = [("revert", b[0].decision_id, False), ("append", c[1].decision_id, False),
                 ("revert", b[2].decision_id, True), ("revert", c[0].decision_id, False),
                 ("revert", b[3].decision_id, False)]
        return steps[i]

    STEPS = 5


async def record_correction_plans(url: str, count: int, tally: Tally) -> list[CorrectionPlan]:
    """Plans for the corrections, recorded (and persisted) before the load starts, so
    no decision of the load meets a revert."""
    plans = [CorrectionPlan.build() for _ in range(count)]
    async with DecisionRecorder.connect(url, credentials=creds("agent")) as rec:
        for p in plans:
            tally.correction_plans.add(p.plan_id)
            for d in p.decisions:
                await publish_counted(rec, d, tally)
        await rec.wait_all_persisted([d for p in plans for d in p.decisions
                                      if d.decision_id in tally.acked], timeout=120)
    return plans


async def operator(url: str, plans: list[CorrectionPlan], spacing: float,
                   tally: Tally) -> None:
    """Round by round, one correction per plan, `spacing` seconds between rounds; a
    plan's requests go out in order from this one client (request order = stream order)."""
    async with CorrectionClient.connect(url, requested_by="scale-run",
                                        credentials=creds("operator")) as ops:
        for i in range(CorrectionPlan.STEPS):
            for p in plans:
                mode, target, cancel = p.step(i)
                req = ops.build(p.plan_id, target, mode, "Use the gateway's own limiter.")
                tally.corrections[req.correction_id] = p.plan_id
                try:
                    await ops.request(p.plan_id, target, mode, req.guidance,
                                      correction_id=req.correction_id)
                except PublishFailed:
                    tally.corrections_unacked.add(req.correction_id)
                    continue
                if cancel:
                    tally.cancels += 1
                    try:
                        await ops.cancel(req.correction_id, p.plan_id, "changed my mind")
                    except PublishFailed:
                        tally.cancels_unacked += 1
            await asyncio.sleep(spacing)


# --- reading back -------------------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    """One message as the stream holds it; `stored_at` is the server's time of storing."""

    subject: str
    data: bytes
    stored_at: datetime


async def stream_messages(js: JetStreamContext, subject: str, timeout: float = 10.0
                          ) -> list[Stored]:
    """Every message the stream holds on `subject`, in stream order, read with an
    ordered consumer until it reports nothing pending."""
    out: list[Stored] = []
    sub = await js.subscribe(subject, ordered_consumer=True, pending_msgs_limit=-1,
                             pending_bytes_limit=-1)
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout=timeout)
            except (TimeoutError, nats.errors.TimeoutError):
                break  # nothing at all on the subject
            out.append(Stored(msg.subject, msg.data, msg.metadata.timestamp))
            if msg.metadata.num_pending == 0:
                break
    finally:
        await sub.unsubscribe()
    return out


async def stream_bodies(js: JetStreamContext, subject: str, timeout: float = 10.0
                        ) -> list[tuple[str, bytes]]:
    """(subject, body) of every message the stream holds on `subject`, in stream order."""
    return [(m.subject, m.data) for m in await stream_messages(js, subject, timeout)]


def decision_id_of(body: bytes) -> str:
    loaded: dict[str, Any] = json.loads(body)
    return str(loaded.get("decision_id"))


async def drained(js: JetStreamContext, stream: str, durable: str,
                  timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            info = await js.consumer_info(stream, durable)
            if not info.num_pending and not info.num_ack_pending:
                return True
        except (*RETRYABLE_INFO, NotFoundError):
            pass
        await asyncio.sleep(0.25)
    return False


async def deliveries(js: JetStreamContext) -> tuple[int, int]:
    """(deliveries the recorder's consumer made, messages it had to deliver): their
    difference is every redelivery since the consumer was made, however caused."""
    info = await retrying(lambda: js.consumer_info(DECISIONS_STREAM, RECORDER_DURABLE))
    state = await retrying(lambda: js.stream_info(DECISIONS_STREAM,
                                                  subjects_filter="decisions.recorded.>"))
    messages = sum((state.state.subjects or {}).values())
    return info.delivered.consumer_seq, messages


SHOWN = ("sent", "acknowledged", "not acknowledged", "  of which stored anyway",
         "recorded (MongoDB)", "stored once in the stream", "announced once", "lost",
         "duplicates", "dead letters", "redeliveries",
         "corrections requested", "  not acknowledged", "cancels sent", "terminal (stream)",
         "  applied / failed / cancelled", "double-terminal", "no terminal",
         "per-plan overlaps", "per-plan out of arrival order",
         "  recorded after the later one started", "  recorded while it was chosen")
"""The counts a report prints in this order (before the faults, then after); any other
count follows them."""


@dataclass
class Report:
    """The table a run prints, and the promises it broke."""

    title: str
    tally: Tally
    faults: list[Fault] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    elapsed: float = 0.0

    def table(self) -> str:
        c = self.counts
        rows = [self.title, "-" * 72]
        for key in SHOWN[:11]:
            if key in c:
                rows.append(f"{key:<40} {c[key]}")
        rows.append(f"{'faults':<40} {len(self.faults)}")
        rows += [f.row() for f in self.faults]
        for key in SHOWN[11:]:
            if key in c:
                rows.append(f"{key:<40} {c[key]}")
        rows += [f"{key:<40} {value}" for key, value in c.items() if key not in SHOWN]
        rows.append(f"{'elapsed (s)':<40} {self.elapsed:.1f}")
        rows += [f"note: {n}" for n in self.notes]
        rows += [f"BROKEN: {p}" for p in self.problems]
        rows.append("all promises held" if not self.problems
                    else f"{len(self.problems)} promise(s) broken")
        return "\n".join(rows)


def recorder_durables(partitions: int) -> list[str]:
    return [p.durable for p in partition_list(RECORDED_PREFIX, RECORDER_DURABLE, partitions)]


async def check(report: Report, nc: Client, db: AsyncDatabase[Document],
                drain_timeout: float = 180.0, partitions: int = 1) -> None:
    """Wait for the workers to finish, then count everything from MongoDB and the streams."""
    t = report.tally
    js = nc.jetstream()
    for durable in recorder_durables(partitions):
        if not await drained(js, DECISIONS_STREAM, durable, drain_timeout):
            report.problems.append(f"the recorder's consumer {durable} not drained in "
                                   f"{drain_timeout:g} s")
    await _wait_terminal(db, t, drain_timeout)
    c = report.counts
    c["sent"] = len(t.sent)
    c["acknowledged"] = len(t.acked)
    c["not acknowledged"] = len(t.unacked)

    ids = list(t.sent)
    stored: set[str] = set()
    for i in range(0, len(ids), 5000):
        stored |= {d["_id"] async for d in db.decisions.find(
            {"_id": {"$in": ids[i:i + 5000]}}, {"_id": 1})}
    c["  of which stored anyway"] = len(t.unacked & stored)
    c["recorded (MongoDB)"] = len(stored & t.acked)
    lost = t.acked - stored
    c["lost"] = len(lost)
    if lost:
        report.problems.append(f"{len(lost)} acknowledged decisions not recorded, e.g. "
                               f"{sorted(lost)[:3]}")

    recorded = Counter(decision_id_of(b) for _, b in
                       await stream_bodies(js, "decisions.recorded.>"))
    persisted = Counter(decision_id_of(b) for _, b in
                        await stream_bodies(js, "decisions.persisted.>"))
    twice_in_stream = [i for i in t.sent if recorded[i] > 1]
    twice_announced = [i for i in t.sent if persisted[i] > 1]
    missing_in_stream = [i for i in t.acked if recorded[i] == 0]
    not_announced = [i for i in stored if persisted[i] == 0]
    c["stored once in the stream"] = sum(1 for i in t.acked if recorded[i] == 1)
    c["announced once"] = sum(1 for i in stored if persisted[i] == 1)
    dense = await _dense(db, t.load_plans | t.correction_plans)
    c["duplicates"] = len(twice_in_stream) + len(twice_announced) + len(dense)
    for what, items in (("stored twice in the stream", twice_in_stream),
                        ("announced twice", twice_announced),
                        ("acknowledged but not in the stream", missing_in_stream),
                        ("recorded but never announced", not_announced),
                        ("plans with sequence numbers not dense", dense)):
        if items:
            report.problems.append(f"{len(items)} {what}, e.g. {items[:3]}")
    # How close the run came to the parent wait (RECORDER_PARENT_WAIT_SECONDS): a
    # decision that waits longer is dead-lettered though acknowledged.
    waited = [d.get("waited_ms", 0) / 1000
              async for d in db.parent_waits.find({}, {"waited_ms": 1})]
    c["waited for a parent"] = (f"{len(waited)} (longest {max(waited):.1f} s)" if waited
                                else "0")
    c["dead letters"] = await db.dead_letters.count_documents({})
    if c["dead letters"]:
        rules: Counter[str] = Counter()
        async for dl in db.dead_letters.find({}, {"errors.rule": 1}):
            rules.update(str(e.get("rule")) for e in dl.get("errors", [])[:1])
        report.notes.append(f"dead letters by rule: {dict(rules)}")
    if t.corrections:
        await check_corrections(report, js, db)


async def _wait_terminal(db: AsyncDatabase[Document], t: Tally, timeout: float) -> None:
    wanted = [i for i in t.corrections if i not in t.corrections_unacked]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = await db.corrections.count_documents(
            {"_id": {"$in": wanted}, "status": {"$in": list(TERMINAL)}})
        if done >= len(wanted):
            return
        await asyncio.sleep(0.5)


async def _dense(db: AsyncDatabase[Document], plans: set[str]) -> list[str]:
    per_plan: dict[str, list[int]] = {}
    async for d in db.decisions.find({"plan_id": {"$in": list(plans)}},
                                     {"plan_id": 1, "sequence_number": 1}):
        per_plan.setdefault(d["plan_id"], []).append(d["sequence_number"])
    return [p for p, seqs in per_plan.items() if sorted(seqs) != list(range(len(seqs)))]


async def check_corrections(report: Report, js: JetStreamContext,
                            db: AsyncDatabase[Document]) -> None:
    """One terminal event each (counted in the stream), and per plan: no two corrections
    running at once, and run in arrival order (from the stored history)."""
    t, c = report.tally, report.counts
    acked = [i for i in t.corrections if i not in t.corrections_unacked]
    c["corrections requested"] = len(t.corrections)
    c["  not acknowledged"] = len(t.corrections_unacked)
    c["cancels sent"] = f"{t.cancels} ({t.cancels_unacked} not acknowledged)"
    terminal: Counter[str] = Counter()
    outcome: Counter[str] = Counter()
    announced_pending: dict[str, datetime] = {}
    for m in await stream_messages(js, "corrections.events.>"):
        status = m.subject.rsplit(".", 1)[-1]
        cid = str(json.loads(m.data).get("correction_id"))
        if status in TERMINAL and cid in t.corrections:
            terminal[cid] += 1
            outcome[status] += 1
        elif status == "pending":
            announced_pending.setdefault(cid, m.stored_at)
    c["terminal (stream)"] = sum(1 for i in acked if terminal[i] >= 1)
    c["  applied / failed / cancelled"] = " / ".join(str(outcome[s]) for s in TERMINAL)
    double = [i for i in acked if terminal[i] > 1]
    none = [i for i in acked if terminal[i] == 0]
    c["double-terminal"] = len(double)
    c["no terminal"] = len(none)
    if double:
        report.problems.append(f"{len(double)} corrections with two terminal events: "
                               f"{double[:3]}")
    if none:
        report.problems.append(f"{len(none)} corrections without a terminal event: {none[:3]}")
    docs = await db.corrections.find({"_id": {"$in": acked}}).to_list()
    not_terminal = [d["_id"] for d in docs if d["status"] not in TERMINAL]
    if not_terminal or len(docs) != len(acked):
        report.problems.append(f"{len(acked) - len(docs)} corrections not recorded, "
                               f"{len(not_terminal)} not terminal in MongoDB")
    order = per_plan_order(docs, announced_pending)
    c["per-plan overlaps"] = len(order.overlaps)
    c["per-plan out of arrival order"] = (len(order.broken) + len(order.late)
                                          + len(order.undecided))
    c["  recorded after the later one started"] = len(order.late)
    c["  recorded while it was chosen"] = len(order.undecided)
    if order.overlaps:
        report.problems.append(f"corrections of one plan ran at once: {order.overlaps[:3]}")
    if order.broken:
        report.problems.append(f"corrections run out of arrival order: {order.broken[:3]}")
    if order.late or order.undecided:
        report.notes.append(
            f"{len(order.late) + len(order.undecided)} pairs of one plan's corrections ran "
            "against arrival order because the earlier was not yet recorded when the later "
            "was chosen, or may not have been (the known limit of several replicas, "
            "docs/corrections.md Ordering): " + str((order.late + order.undecided)[:3]))


@dataclass
class PlanOrder:
    """Per plan, over the corrections that ran: pairs whose runs overlapped, and pairs
    that ran against arrival order, split by what the timestamps prove (see
    per_plan_order)."""

    overlaps: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)


def _first_at(doc: Document, statuses: Collection[str]) -> datetime | None:
    """When the stored history first reached one of `statuses`."""
    return next((h["at"] for h in doc["history"] if h["to_status"] in statuses), None)


@dataclass(frozen=True)
class _Run:
    start: datetime  # the ANALYZING stamp
    end: datetime | None  # the terminal stamp
    stamped: datetime  # the PENDING stamp: taken before the record's commit
    arrival: int
    correction_id: str


def _run(doc: Document) -> _Run | None:
    start = _first_at(doc, ("analyzing",))
    if start is None:
        return None  # never ran (cancelled or failed while PENDING)
    return _Run(start, _first_at(doc, TERMINAL), doc["history"][0]["at"],
                doc.get("arrival", 0), doc["_id"])


def per_plan_order(docs: list[Document], announced_pending: dict[str, datetime]
                   ) -> PlanOrder:
    """Per plan, over the corrections that ran (reached ANALYZING), each run being
    [analyzing, terminal] from the stored history: pairs whose runs overlap, and pairs
    where y arrived first (lower stream sequence) but x ran before it.

    The runner runs the oldest arrival among the corrections recorded when it reads the
    plan's list (contracts.corrections.running.next_to_run), so such a pair is broken only if y's
    record had committed before x's runner read that list. The stamps are worker clocks
    taken before commits, so they bound those moments from one side only:
    - y's commit is at most when its PENDING event was stored in the stream (published
      after the commit; `announced_pending`);
    - x's list read is at least x's own PENDING stamp (x was in the list) and the end
      stamp of every run that ended before x started (that run's terminal commit came
      before the next read: runs of one plan never overlap).
    Broken: y announced before that lower bound: certain. Late: y stamped after x
    started: certainly the known limit (docs/corrections.md Ordering). Undecided: in
    between, where a loaded machine's stalls put y's commit and x's read in the same
    moment; the stamps cannot order them. (Comparing stamps alone called such a pair
    broken: a 0.5 s stall on a 2-core machine under SIGKILLs did.)"""
    out = PlanOrder()
    by_plan: dict[str, list[Document]] = {}
    for d in docs:
        by_plan.setdefault(d["plan_id"], []).append(d)
    for plan, plan_docs in by_plan.items():
        runs = sorted((r for d in plan_docs if (r := _run(d)) is not None),
                      key=lambda r: (r.start, r.correction_id))
        for a, b in itertools.pairwise(runs):
            if a.end is None or b.start < a.end:
                out.overlaps.append(f"{plan}: {a.correction_id} and {b.correction_id}")
        for i, x in enumerate(runs):
            read_after = max([x.stamped] + [r.end for r in runs[:i]
                                            if r.end is not None and r.end <= x.start])
            for y in runs[i + 1:]:
                if y.arrival >= x.arrival:
                    continue
                gap = (x.start - y.stamped).total_seconds()
                when = f"{abs(gap):.2f} s {'before' if gap >= 0 else 'after'}"
                pair = (f"{plan}: {y.correction_id} (arrival {y.arrival}, stamped PENDING "
                        f"{when} the other started) ran after {x.correction_id} "
                        f"({x.arrival})")
                announced = announced_pending.get(y.correction_id)
                if y.stamped > x.start:
                    out.late.append(pair)
                elif announced is not None and announced < read_after:
                    out.broken.append(pair)
                else:
                    out.undecided.append(pair)
    return out


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def cluster_client(cluster: Cluster) -> Client:
    return await connect_bounded(cluster.url, credentials=creds("worker"))


async def readyz(addr: str, timeout: float = 60.0) -> bool:
    """The worker's /readyz answered 200 (NATS, MongoDB and every consumer pulling)."""
    host, port = addr.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"GET /readyz HTTP/1.0\r\nHost: x\r\n\r\n")
            await writer.drain()
            status = await reader.readline()
            writer.close()
            if b" 200 " in status:
                return True
        await asyncio.sleep(0.1)
    return False


async def start_worker(w: Workers, cluster: Cluster) -> None:
    """Start (or start again) and wait for its own /readyz, not only for some replica's
    pull (Workers.start's test passes as soon as any worker pulls)."""
    await w.start(cluster.live_url())
    if not await readyz(w.env["HEALTH_ADDR"]):
        raise RuntimeError(f"worker not ready in 60 s:\n{w.log()[-3000:]}")


def stop_all(workers: Iterable[Workers]) -> None:
    for w in workers:
        with contextlib.suppress(Exception):
            w.stop()


@dataclass
class Stack:
    """What both runs stand on: a 3-node NATS cluster with the production streams, a
    worker-role client on it, and `python -m workers` processes, each ready."""

    cluster: Cluster
    nc: Client | None = None
    workers: list[Workers] = field(default_factory=list)

    partitions: int = 1

    @classmethod
    async def start(cls, base: Path, mongo_uri: str, db_name: str, workers: int, *,
                    partitions: int = 1) -> Stack:
        """Started in order; on a failure whatever already runs is stopped."""
        stack = cls(Cluster.start(base / "nats"), partitions=partitions)
        try:
            stack.nc = await cluster_client(stack.cluster)
            await create_streams(stack.nc)
            env = workers_env(stack.cluster.url, mongo_uri, db_name, base,
                              RECORDER_PARTITIONS=str(partitions), LOG_FORMAT="json")
            for i in range(workers):
                w = Workers({**env, "HEALTH_ADDR": f"127.0.0.1:{free_port()}"},
                            base / f"worker-{i}.log")
                stack.workers.append(w)
                await start_worker(w, stack.cluster)
        except BaseException:
            await stack.stop()
            raise
        return stack

    @property
    def client(self) -> Client:
        assert self.nc is not None, "used after a failed start"
        return self.nc

    async def stop(self) -> None:
        stop_all(self.workers)
        if self.nc is not None:
            await self.nc.close()
        self.cluster.stop()


# --- the runs -----------------------------------------------------------------------------


@dataclass
class Size:
    decisions: int = 10_000
    agents: int = 4
    plans_per_agent: int = 3
    correction_plans: int = 8
    spacing: float = 2.0  # seconds between rounds of corrections
    seed: int = 1
    drain_timeout: float = 300.0


async def until_progress(tally: Tally, target: int, load: asyncio.Future[Any]) -> None:
    while tally.progress < target and not load.done():  # noqa: ASYNC110 - a count fed by the agents
        await asyncio.sleep(0.05)


async def create_streams(nc: Client) -> None:
    """The production streams, R3, once the cluster has elected its meta leader (the
    workers would exit on a 503 at start instead of waiting)."""
    limits = StreamLimits.of(StreamProfile.PRODUCTION, max_bytes=512 * 1024**2,
                             max_payload_bytes=Settings().max_payload_bytes)
    await until_streams(nc.jetstream(), limits)


def start_load(cluster: Cluster, size: Size, tally: Tally, rng: random.Random
               ) -> asyncio.Future[Any]:
    per_agent = size.decisions // size.agents
    return asyncio.gather(*(agent(cluster.url, per_agent, size.plans_per_agent,
                                  random.Random(rng.random()), tally)
                            for _ in range(size.agents)))


async def node_faults(cluster: Cluster, js: JetStreamContext, tally: Tally, size: Size,
                      load: asyncio.Future[Any], report: Report, started: float) -> None:
    """kill -9 the DECISIONS leader at a quarter of the load, restart it; at 60%, kill
    -9 the CORRECTIONS leader (a follower if that is the node killed first), restart it.
    Each time: how long until the stream had a new leader, and until every replica was
    current again."""
    first = None
    for fraction, stream in ((0.25, DECISIONS_STREAM), (0.6, CORRECTIONS_STREAM)):
        await until_progress(tally, int(size.decisions * fraction), load)
        leader = await leader_of(js, stream)
        victim, role = leader, f"{stream} leader"
        if victim is None or victim == first:
            victim = next(n.name for n in cluster.nodes if n.name not in (first, leader))
            role = f"{stream} follower"
        node = cluster.node(victim)
        node.kill()
        at = time.monotonic() - started
        detail = f"({tally.progress} decisions sent)"
        if role.endswith("leader"):
            new, seconds = await wait_new_leader(js, stream, victim)
            detail += f"; new leader {new} after {seconds:.2f} s"
        report.faults.append(Fault(at, f"kill -9 {victim} ({role})", detail))
        await asyncio.sleep(2.0)
        node.start()
        at = time.monotonic() - started
        caught = await wait_current(js, [DECISIONS_STREAM, CORRECTIONS_STREAM])
        report.faults.append(Fault(at, f"restart {victim}",
                                   f"every replica current after {caught:.1f} s"))
        first = first or victim


async def loaded(cluster: Cluster, nc: Client, db: AsyncDatabase[Document], size: Size,
                 tally: Tally, rng: random.Random, report: Report,
                 faults: Callable[[asyncio.Future[Any], float], Awaitable[Any]],
                 partitions: int = 1) -> None:
    """What both runs share: the correction plans recorded first, then the agents' load
    and the operator's corrections with `faults(load, started)` beside them, then the
    counts (`check`)."""
    plans = await record_correction_plans(cluster.url, size.correction_plans, tally)
    started = time.monotonic()
    load = start_load(cluster, size, tally, rng)
    await asyncio.gather(load, operator(cluster.url, plans, size.spacing, tally),
                         faults(load, started))
    report.elapsed = time.monotonic() - started
    await check(report, nc, db, size.drain_timeout, partitions)


async def cluster_fault_run(base: Path, mongo_uri: str, db: AsyncDatabase[Document],
                            db_name: str, size: Size, workers: int = 2,
                            faults: bool = True) -> Report:
    """Item 2: the cluster loses the DECISIONS leader, then another node, under load
    (`faults=False`: the same load on the same stack with nothing killed, the control)."""
    rng = random.Random(size.seed)
    tally = Tally()
    report = Report(f"NATS cluster fault run: {size.decisions} decisions, {size.agents} "
                    f"agents, {workers} workers, seed {size.seed}", tally)
    stack = await Stack.start(base, mongo_uri, db_name, workers)
    cluster, nc = stack.cluster, stack.client
    try:
        await loaded(cluster, nc, db, size, tally, rng, report,
                     lambda load, started: node_faults(cluster, nc.jetstream(), tally, size,
                                                       load, report, started)
                     if faults else asyncio.sleep(0))
        for i, w in enumerate(stack.workers):
            if not w.alive:
                code = w.proc.returncode if w.proc else None
                report.problems.append(f"worker {i} died (exit {code}): {w.log()[-4000:]}")
    finally:
        await stack.stop()
    return report


async def recorder_busy(js: JetStreamContext) -> bool:
    """The recorder's consumer still has messages to deliver or to see acknowledged."""
    try:
        info = await js.consumer_info(DECISIONS_STREAM, RECORDER_DURABLE)
    except (*RETRYABLE_INFO, NotFoundError):
        return True
    return bool(info.num_pending or info.num_ack_pending)


async def worker_kills(ws: list[Workers], cluster: Cluster, js: JetStreamContext,
                       rng: random.Random, kills: int, load: asyncio.Future[Any],
                       report: Report, started: float) -> None:
    """`kills` times, every 0.5 to 1.5 s while the agents publish or the recorder still has
    a backlog: SIGKILL a worker, start it again 0 to 1.5 s later. The workers are taken
    in turn from a random one, so each is killed once in every len(ws) kills: the one
    recording (workers.leading) among them, not only standbys."""
    first = rng.randrange(len(ws))
    for k in range(kills):
        await asyncio.sleep(rng.uniform(0.5, 1.5))
        if load.done() and not await recorder_busy(js):
            return
        i = (first + k) % len(ws)
        ws[i].kill()
        at = time.monotonic() - started
        await asyncio.sleep(rng.uniform(0.0, 1.5))
        t0 = time.monotonic()
        await start_worker(ws[i], cluster)
        report.faults.append(Fault(at, f"SIGKILL worker {i}",
                                   f"restarted, ready {time.monotonic() - t0:.1f} s later"))


async def sigterm_phase(ws: list[Workers], cluster: Cluster, nc: Client,
                        db: AsyncDatabase[Document], size: Size, report: Report) -> None:
    """SIGTERM a worker while decisions flow: it finishes what it holds and exits 0, and
    the recorder's consumer redelivers nothing. The decisions are children of roots
    already recorded, so no delivery waits for a parent (a nak would be a redelivery)."""
    js = nc.jetstream()
    tally = Tally()
    n = max(1000, size.decisions // 5)
    async with DecisionRecorder.connect(cluster.url, credentials=creds("agent")) as rec:
        roots = [build_root("Ship the rate limiter", context=CONTEXT) for _ in range(6)]
        for r in roots:
            tally.load_plans.add(r.plan_id)
            await publish_counted(rec, r, tally)
        await rec.wait_all_persisted(roots, timeout=60)
    await drained(js, DECISIONS_STREAM, RECORDER_DURABLE, 60)
    seq, msgs = await deliveries(js)
    before = seq - msgs

    async def flat(k: int) -> None:
        async with DecisionRecorder.connect(cluster.url, credentials=creds("agent")) as rec:
            for i in range(n // 3):
                r = roots[(i + k) % len(roots)]
                await publish_counted(rec, build_child(
                    r, DecisionType.TOOL_INVOCATION, question=f"Step {i}?",
                    chosen_option="run it", context=CONTEXT), tally)

    load = asyncio.gather(*(flat(k) for k in range(3)))
    started = time.monotonic()
    await until_progress(tally, n // 3, load)
    w = ws[0]
    assert w.proc is not None
    w.proc.send_signal(signal.SIGTERM)
    at = time.monotonic() - started
    while w.proc.poll() is None and time.monotonic() - started < 60:  # noqa: ASYNC110 - a child process
        await asyncio.sleep(0.05)
    code = w.proc.poll()
    report.faults.append(Fault(at, "SIGTERM worker 0", f"exit {code} after "
                               f"{time.monotonic() - started - at:.1f} s ({tally.progress} "
                               f"of {n // 3 * 3} sent)"))
    if code != 0:
        report.problems.append(f"the SIGTERM'd worker exited {code}")
    await start_worker(w, cluster)
    await load
    sub = Report("", tally)
    await check(sub, nc, db, size.drain_timeout)
    seq, msgs = await deliveries(js)
    redelivered = seq - msgs - before
    report.counts["redeliveries"] = f"{redelivered} (SIGTERM phase, {len(tally.sent)} decisions)"
    report.problems += [f"SIGTERM phase: {p}" for p in sub.problems]
    if redelivered:
        report.problems.append(f"{redelivered} redeliveries by the recorder's consumer "
                               "after a SIGTERM")


async def workers_fault_run(base: Path, mongo_uri: str, db: AsyncDatabase[Document],
                            db_name: str, size: Size, workers: int = 3, kills: int = 4
                            ) -> tuple[Report, Stack]:
    """Item 3: `workers` processes under random SIGKILLs and restarts while the load
    flows, then a SIGTERM during load. Returns the stack still running (for the
    throughput curve); the caller stops it (`Stack.stop`)."""
    rng = random.Random(size.seed)
    tally = Tally()
    report = Report(f"Worker fault run: {size.decisions} decisions, {size.agents} agents, "
                    f"{workers} workers, {kills} SIGKILLs, seed {size.seed}", tally)
    stack = await Stack.start(base, mongo_uri, db_name, workers)
    cluster, nc, ws = stack.cluster, stack.client, stack.workers
    try:
        await loaded(cluster, nc, db, size, tally, rng, report,
                     lambda load, started: worker_kills(ws, cluster, nc.jetstream(), rng,
                                                        kills, load, report, started))
        await sigterm_phase(ws, cluster, nc, db, size, report)
    except BaseException:
        await stack.stop()
        raise
    return report, stack


async def throughput_curve(stack: Stack, db: AsyncDatabase[Document], burst: int, reps: int,
                           plans: int = 10) -> dict[int, list[float]]:
    """Decisions/s recorded with 1, 2, ... len(ws) worker processes: the others are
    stopped; each rep publishes `burst` decisions under roots already recorded, as fast
    as the stream acks them, and times the first publish to the last one in MongoDB."""
    cluster, ws = stack.cluster, stack.workers
    agent = await connect_bounded(cluster.url, credentials=creds("agent"))
    js = agent.jetstream()
    out: dict[int, list[float]] = {}
    try:
        for w in ws[1:]:
            w.stop()
        for k in range(1, len(ws) + 1):
            if not ws[k - 1].alive:
                await start_worker(ws[k - 1], cluster)
            out[k] = []
            for _ in range(reps):
                out[k].append(await _burst(js, db, burst, plans))
    finally:
        await agent.close()
    return out


async def _burst(js: JetStreamContext, db: AsyncDatabase[Document], burst: int,
                 plans: int) -> float:
    roots = [build_root("Ship the rate limiter", context=CONTEXT) for _ in range(plans)]
    for r in roots:
        subject, body, msg_id = wire_message(r)
        await js.publish(subject, body, headers={MSG_ID_HEADER: msg_id})
    ids = [r.plan_id for r in roots]
    while await db.decisions.count_documents({"plan_id": {"$in": ids}}) < plans:  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    children = [build_child(roots[i % plans], DecisionType.TOOL_INVOCATION,
                            question=f"Step {i}?", chosen_option="run it", context=CONTEXT)
                for i in range(burst)]
    started = time.monotonic()
    acks = []
    for d in children:
        subject, body, msg_id = wire_message(d)
        acks.append(await js.publish_async(subject, body, headers={MSG_ID_HEADER: msg_id}))
    await asyncio.gather(*acks)
    want = burst + plans
    deadline = started + 300
    while await db.decisions.count_documents({"plan_id": {"$in": ids}}) < want:
        if time.monotonic() > deadline:
            raise AssertionError("burst not recorded in 300 s")
        await asyncio.sleep(0.05)
    return burst / (time.monotonic() - started)


def curve_table(curve: dict[int, list[float]], burst: int, label: str) -> str:
    rows = [f"Throughput: {burst} decisions per burst, median of {len(curve[1])} "
            f"({label})", f"{'workers':>8} {'decisions/s (median)':>22}   each run"]
    for k, rates in curve.items():
        rows.append(f"{k:>8} {median(rates):>22.0f}   "
                    + ", ".join(f"{r:.0f}" for r in rates))
    return "\n".join(rows)
