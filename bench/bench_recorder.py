"""Recorder throughput and CPU with 1, 2, 3 ... worker processes over the same partitions,
against a bare insert_many baseline in the same run.

    python bench/bench_recorder.py [--decisions 10000] [--plans 60] [--workers 1,2,3]
                                   [--partitions 6] [--pairs 3] [--bare-runs 1]

Starts its own nats-server and secantusd-py (free ports, temp dir). For each worker
count it starts that many `python -m workers` processes with RECORDER_PARTITIONS set,
waits until they hold every partition between them (evenly), records a warm-up of 180
decisions (untimed: a fresh database's first transactions conflict, see one_run),
publishes decision trees (`--plans` interleaved plans) with a plain nats-py client as
fast as the stream acks them, and times each decision from publish to its
`decisions.persisted` event. It reads each process's CPU time from /proc before and
after, so the table shows how the recording CPU splits across the processes, and how
long the server's threads were ready to run but waited for a CPU (`waited_seconds`), in
the burst and in the bare insert: on a machine of two cores the server shares them with
the worker, nats-server and the publisher, which its CPU time does not show. Each count
records into a database of its own, on the same servers.

The first worker count also times 2,000 decisions offered at `--paced-rate` per
second (publish to `persisted`: the latency when the recorder keeps up).

Then it inserts the very documents the first run's burst stored into a fresh collection with the
same indexes, with `insert_many` in batches of the recorder's batch size, on the same
server (`--bare-runs` times, the median counts): recorder / bare is the first run's rate
over that bare rate. The first worker count runs `--pairs` times (default 3), each run
followed at once by its bare inserts, and the ratio printed is the median of the pairs'
ratios: this machine's speed drifts by half within minutes (a fixed Python loop ran 1.5
to 2.5 million rounds in 2 s between runs), so one pair says little and the spread
of the pairs is printed beside it.

On a machine with fewer cores than processes, more processes cannot add throughput; what
the table shows instead is the CPU per 1,000 decisions each process spends, and from it
what each would carry on a core of its own (printed as a projection, not a measurement).

Signatures are on (`--unsigned` turns them off): the workers run with a principals file
and REQUIRE_SIGNATURES=1, and every decision is signed by an agent's key, as the client
library signs it. The cost of verifying, per 1,000 decisions, is timed in this process
on the very messages sent (the worker's check: contracts.trust.policy.FamilyTrust).
Every record is chained (its link computed in the recorder's transaction); after the
runs, the burst's plans are audited as `agents audit verify` does (read from MongoDB as
export lines, then the chain, each kept signature and each supersession checked), and
that cost per 1,000 decisions is printed too.

Checked invariants are in force in every run (`--checks N`, default 20; 0 for none): N
GLOBAL invariants with a CEL check each, kept by every decision sent, so the recorder's
gate evaluates each on every decision (contracts.invariants.gate). What that evaluation
costs per 1,000 decisions is timed in this process (a Gate over the same rule set).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats
from pymongo import AsyncMongoClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bootstrap.settings import Settings  # noqa: E402
from contracts.decisions.model import Decision  # noqa: E402
from contracts.invariants.evaluation import Budget  # noqa: E402
from contracts.invariants.gate import Gate, GateInputs  # noqa: E402
from contracts.invariants.model import Invariant, InvariantScope  # noqa: E402
from contracts.invariants.rules import RuleSet  # noqa: E402
from contracts.recording.families import RECORDED  # noqa: E402
from contracts.shared.ids import new_id  # noqa: E402
from contracts.shared.roles import Role  # noqa: E402
from contracts.trust.audit import verify_export  # noqa: E402
from contracts.trust.audit_lines import header, principals_json  # noqa: E402
from contracts.trust.keys import new_user_seed, public_of_seed  # noqa: E402
from contracts.trust.policy import TrustPolicy  # noqa: E402
from contracts.trust.principals import (  # noqa: E402
    Principal,
    PrincipalKey,
    load_directory,
    render_directory,
)
from contracts.trust.signing import Signer  # noqa: E402
from deploy.embedded import die_with_parent, free_port, start_mongo, start_nats  # noqa: E402
from store.audit import AuditReader  # noqa: E402
from store.database import DECISIONS, PLAN_LOCKS, PLANS, connect, ensure_indexes  # noqa: E402
from store.invariants import InvariantRepository  # noqa: E402
from tests.factories import encode, headers, plan_tree, subject  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """CPU time (user + system) each process has used so far, from /proc (Linux); an
    empty dict elsewhere. Where the time of a phase goes on a shared machine: the rates
    move with the other load, the CPU per decision much less."""
    out: dict[str, float] = {}
    for name, pid in pids.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return {}
        out[name] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return out


def waited_seconds(pids: dict[str, int]) -> dict[str, float]:
    """Time each process's threads have spent ready to run but waiting for a CPU, from
    /proc/<pid>/task/*/schedstat (Linux, its second field; an empty dict elsewhere), and,
    as "steal", the time the machine's host kept its CPUs (/proc/stat). On two cores the
    server, the worker, nats-server and the publisher take turns, and the server's CPU
    time does not show the time it was kept waiting. Summed over the threads: two
    threads of one process ready at once count twice (a Python server's threads also
    hand its GIL to each other), so it is an upper bound on the time the process lost."""
    out: dict[str, float] = {}
    try:
        for name, pid in pids.items():
            out[name] = sum(int(t.read_text().split()[1])
                            for t in Path(f"/proc/{pid}/task").glob("*/schedstat")) / 1e9
        cpu_line = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        out["steal"] = int(cpu_line[8]) / CLOCK_TICKS
    except (OSError, IndexError, ValueError):
        return {}
    return out


def per_1000(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
    return {k: (after[k] - before[k]) * 1000 / n for k in before if k in after}


def shown(cpu: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in cpu.items()) if cpu else "n/a (no /proc)"


CHECKS = [
    '!(tool.name == "shell" && tool.arguments.cmd.contains("rm -rf"))',
    '!paths.exists(p, p.startsWith("deploy/prod/"))',
    "confidence == null || confidence >= 0.1",
    '!chosen_option.contains("DROP TABLE")',
    "size(question) < 5000",
    'decision_type != "subplan_parallel_spawn"',
    '!artifacts.exists(a, a.endsWith(".pem"))',
    "size(alternatives) <= 50",
    '!(decision_type == "tool_invocation" && tool.name == "curl")',
    'project == null || project != "frozen"',
    "size(path) < 200",
    '!resources.exists(r, r.id == "prod-db")',
    '!question.matches("(?i)password")',
    'chosen_option != ""',
    'size(path) == 0 || path[0] == "prompt_definition"',
    'action_template == null || action_template != "forbidden"',
    '!tool.arguments.exists(k, k == "sudo")',
    "size(paths) < 256",
    '!chosen_option.startsWith("sudo ")',
    '!alternatives.exists(a, a == "rm -rf /")',
]
"""Checks of the kinds operators write, each kept by every decision the bench sends."""


def checked_invariants(n: int) -> list[Invariant]:
    return [Invariant(name=f"bench-check-{i}", description="bench", check=CHECKS[i % len(CHECKS)],
                      scope=InvariantScope.GLOBAL) for i in range(n)]


def evaluation_cost(invariants: list[Invariant], sent: list[dict[str, Any]]) -> tuple[float, int]:
    """Seconds of CPU the gate spends on 1,000 of `sent`, and the evaluations it made."""
    sample = [Decision.model_validate(d) for d in sent[:1000]]
    rules = RuleSet.of(1, invariants)
    budget = Budget(3600.0)
    gate = Gate(GateInputs(rules), budget)
    start = time.process_time()
    refused = [d.decision_id for d in sample if gate.admit(d) is not None]
    spent = time.process_time() - start
    assert not refused and not gate.outcomes, "every bench decision keeps every check"
    return spent * 1000 / len(sample), budget.evaluations * 1000 // len(sample)


async def add_invariants(mongo_uri: str, db_name: str, invariants: list[Invariant]
                         ) -> list[Invariant]:
    client: AsyncMongoClient[dict[str, Any]] = connect(mongo_uri)
    db = client[db_name]
    await ensure_indexes(db)
    for inv in invariants:
        await InvariantRepository(db).add(inv)
    await client.close()
    return invariants


async def add_plans(mongo_uri: str, db_name: str, count: int) -> None:
    """`count` plans' records already in the store (`--existing-plans`), as a deployment
    that has run a while holds: what a write whose cost grows with the store pays for."""
    client: AsyncMongoClient[dict[str, Any]] = connect(mongo_uri)
    now = datetime.now(UTC)
    plans = client[db_name][PLANS]
    for i in range(0, count, 5000):
        await plans.insert_many([
            {"_id": new_id(), "next_sequence": 1, "status": "active", "created_at": now,
             "root_decision_id": new_id(), "root_created_at": now, "owner": AGENT,
             "delegates": [], "project": "bench", "parent_plan_id": None}
            for _ in range(min(5000, count - i))])
    await client.close()


def interleaved(plans: int, per_plan: int, seed: int) -> list[dict[str, Any]]:
    trees = [plan_tree(per_plan, seed=seed + s) for s in range(plans)]
    return [t[i] for i in range(per_plan) for t in trees]


async def wait_spread(mongo_uri: str, db_name: str, partitions: int, workers: int,
                      timeout: float = 120.0) -> None:
    """Until the workers hold every partition between them, as evenly as they can."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongo_uri, tz_aware=True)
    want = sorted([partitions // workers + (1 if i < partitions % workers else 0)
                   for i in range(workers)])
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            owners = Counter([d["owner"] async for d in client[db_name][PLAN_LOCKS].find(
                {"_id": {"$regex": "^role:recorder"}})])
            if sorted(owners.values()) == [w for w in want if w]:
                return
            await asyncio.sleep(0.2)
        raise RuntimeError(f"partitions not spread over {workers} workers in {timeout} s")
    finally:
        await client.close()


AGENT = "bench-agent"


def trust_setup(data: Path) -> tuple[Signer, Path]:
    seed = new_user_seed()
    principals = data / "principals.toml"
    principals.write_text(render_directory([Principal(
        name=AGENT, role=Role.AGENT, keys=(PrincipalKey(public=public_of_seed(seed)),))]))
    return Signer(seed), principals


def signed_headers(signer: Signer | None, d: dict[str, Any]) -> dict[str, str]:
    h = headers(d)
    if signer is not None:
        h |= signer.headers(kind=RECORDED.name, subject=subject(d), msg_id=d["decision_id"],
                            body=encode(d))
    return h


def verification_cost(signer: Signer, principals: Path, sent: list[dict[str, Any]]
                      ) -> tuple[float, float]:
    """CPU seconds to sign and to verify 1,000 of `sent`, as the client and the worker
    do (process time, so another process's load on a shared machine does not count)."""
    trust = TrustPolicy(load_directory(principals.read_text()), required=True)
    check = trust.for_family(RECORDED)
    assert check is not None
    sample = sent[:1000]
    start = time.process_time()
    msgs = [(subject(d), encode(d), signed_headers(signer, d)) for d in sample]
    signing = time.process_time() - start
    now = datetime.now(UTC)
    start = time.process_time()
    for s, body, h in msgs:
        assert check.identify(h, s, body, now) is not None
    verifying = time.process_time() - start
    return signing * 1000 / len(sample), verifying * 1000 / len(sample)


async def run_load(url: str, sent: list[dict[str, Any]], rate: float | None,
                   signer: Signer | None = None) -> dict[str, float]:
    """Publish `sent` (as fast as possible, or at `rate` per second) and time each one."""
    nc = await nats.connect(url)
    js = nc.jetstream(publish_async_max_pending=20_000)
    published: dict[str, float] = {}
    persisted: dict[str, float] = {}
    done = asyncio.Event()

    wanted = {d["decision_id"] for d in sent}

    async def on_persisted(msg: Any) -> None:
        # Only ours: the reconciler's invariant_enforced decisions are persisted too.
        decision_id = json.loads(msg.data)["decision_id"]
        if decision_id in wanted:
            persisted[decision_id] = time.perf_counter()
        if len(persisted) == len(wanted):
            done.set()

    await nc.subscribe("decisions.persisted.>", cb=on_persisted)
    # Encoded and signed before the clock starts: agents do that on their own machines,
    # and here it would take the CPU the ledger is timed on (its cost is printed apart).
    ready = [(d["decision_id"], subject(d), encode(d), signed_headers(signer, d)) for d in sent]
    start = time.perf_counter()
    futures = []
    for i, (decision_id, to, body, signed) in enumerate(ready):
        if rate:
            await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
        published[decision_id] = time.perf_counter()
        futures.append(await js.publish_async(to, body, headers=signed))
    await asyncio.gather(*futures)
    await asyncio.wait_for(done.wait(), timeout=900)
    end = max(persisted.values())
    await nc.close()
    latencies = sorted((persisted[i] - published[i]) * 1000 for i in published)
    return {
        "rate": len(sent) / (end - start),
        "p50": statistics.median(latencies),
        "p99": latencies[int(len(latencies) * 0.99) - 1],
        "seconds": end - start,
    }


def principal_keys(principals: Path | None) -> list[dict[str, Any]]:
    """The export header's principals (none when unsigned: each record then unverified)."""
    return principals_json(load_directory(principals.read_text()) if principals else None)


async def audit_cost(mongo_uri: str, db_name: str, keys: list[dict[str, Any]],
                     sent: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds per 1,000 decisions to read the plans of `sent` as export lines (wall
    time: mostly the server's) and CPU seconds to verify them (chain, signatures against
    the principals' keys, supersessions), as `agents audit verify` does; and whether
    they verified (and were all signed, when `keys`)."""
    plans = list(dict.fromkeys(d["plan_id"] for d in sent))
    client: AsyncMongoClient[dict[str, Any]] = connect(mongo_uri)
    try:
        start = time.perf_counter()
        entries, lines = await AuditReader(client[db_name]).export(plans)
        reading = time.perf_counter() - start
    finally:
        await client.close()
    head = header(exported_at="", parameters={}, plans=entries, principals=keys)
    start = time.process_time()
    report = verify_export(head, lines)
    verifying = time.process_time() - start
    per = 1000 / max(1, report.records)
    return {"read": reading * per, "verify": verifying * per, "records": report.records,
            "ok": float(report.ok and (not keys or report.signed == len(sent)))}


async def bare_insert(mongo_uri: str, db_name: str, batch: int, runs: int,
                      cpu: Callable[[], dict[str, float]], *,
                      waited: Callable[[], dict[str, float]],
                      sent: list[dict[str, Any]]) -> dict[str, Any]:
    # The workers' own client options (w: majority, j: true...): same durability asked.
    client: AsyncMongoClient[dict[str, Any]] = connect(mongo_uri)
    source = client[db_name][DECISIONS]
    plans = sorted({d["plan_id"] for d in sent})  # the burst's, not the warm-up's
    docs = await source.find({"plan_id": {"$in": plans}}).sort(
        [("plan_id", 1), ("sequence_number", 1)]).to_list()
    rates, cpu0, waited0 = [], cpu(), waited()
    for i in range(runs):
        db = client[f"{db_name}_bare{i}"]
        await ensure_indexes(db)
        start = time.perf_counter()
        for j in range(0, len(docs), batch):
            await db[DECISIONS].insert_many(docs[j:j + batch], ordered=False)
        rates.append(len(docs) / (time.perf_counter() - start))
    out = {"rate": statistics.median(rates), "runs": rates,
           "cpu": per_1000(cpu0, cpu(), len(docs) * runs),
           "waited": per_1000(waited0, waited(), len(docs) * runs)}
    await client.close()
    return out


def start_workers(n: int, env: dict[str, str], logdir: Path, tag: str
                  ) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-m", "workers"], cwd=ROOT, env=env,
                             stdout=(logdir / f"{tag}-worker{i}.log").open("wb"),
                             stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
            for i in range(n)]


@dataclass
class Run:
    workers: int
    burst: dict[str, float]
    cpu: dict[str, float]
    """CPU seconds per 1,000 decisions of each process during the burst."""
    waited: dict[str, float] = field(default_factory=dict)
    """Seconds per 1,000 decisions each process waited for a CPU during the burst (and
    the host's steal): `waited_seconds`."""
    paced: dict[str, float] | None = None
    """The latency run at `--paced-rate` (first worker count only)."""
    sent: list[dict[str, Any]] = field(default_factory=list)
    """The burst's decisions (their plan IDs are new in every call of `interleaved`)."""

    @property
    def worker_cpu(self) -> list[float]:
        return [v for k, v in self.cpu.items() if k.startswith("worker")]


WARM_PLANS, WARM_PER_PLAN = 60, 3
"""The warm-up recorded before each timed burst: plans enough for every partition to
commit (of six, one is left out with odds of about 1 in 1,000)."""


async def one_run(k: int, ns_url: str, mongo: Any, args: argparse.Namespace,
                  data: Path, *, seed: int, signer: Signer | None, principals: Path,
                  db_name: str) -> Run:
    env = {**os.environ, "NATS_URL": ns_url, "MONGODB_URI": mongo.url, "MONGODB_DB": db_name,
           "PYTHONPATH": str(ROOT), "RECORDER_PARTITIONS": str(args.partitions)}
    if signer is not None:
        env |= {"LEDGER_PRINCIPALS": str(principals), "REQUIRE_SIGNATURES": "1"}
    await add_invariants(mongo.url, db_name, checked_invariants(args.checks))
    if args.existing_plans:
        await add_plans(mongo.url, db_name, args.existing_plans)
    procs = start_workers(k, env, data, db_name)
    try:
        await wait_spread(mongo.url, db_name, args.partitions, k)
        pids = {**{f"worker{i}": p.pid for i, p in enumerate(procs)},
                "mongo": mongo.process.pid, "publisher": os.getpid()}
        # Warmed first, as a deployment's database is after its first minute: a fresh
        # database's first writes (its indexes learning they are multikey, say) made the
        # partitions' first transactions conflict on SecantusDB and run again, half of
        # them twice (seen with a command listener in the worker), which the burst's rate
        # then counted.
        await run_load(ns_url, interleaved(WARM_PLANS, WARM_PER_PLAN, seed + 999), None, signer)
        sent = interleaved(args.plans, args.decisions // args.plans, seed)
        cpu0, waited0 = cpu_seconds(pids), waited_seconds(pids)
        burst = await run_load(ns_url, sent, None, signer)
        cpu1, waited1 = cpu_seconds(pids), waited_seconds(pids)
        paced = None
        if args.paced_rate and seed == 0:
            paced = await run_load(ns_url, interleaved(args.plans, 2000 // args.plans, 7),
                                   args.paced_rate, signer)
        return Run(k, burst, per_1000(cpu0, cpu1, len(sent)),
                   per_1000(waited0, waited1, len(sent)), paced, sent)
    finally:
        for p in procs:
            p.terminate()
            p.wait()


def report(args: argparse.Namespace, runs: list[Run], pairs: list[tuple[Run, dict[str, Any]]],
           batch: int, *, signing: tuple[float, float] | None,
           audit: dict[str, float]) -> None:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nRecorder bench: {args.decisions} decisions in {args.plans} plans per run, "
          f"{args.partitions} partitions, batch {batch}, {os.cpu_count()} cores, nats-server "
          f"+ secantusd-py on loopback, "
          f"{'unsigned' if signing is None else 'signed, REQUIRE_SIGNATURES=1'}; "
          f"load average at the end {load}\n")
    if signing is not None:
        print(f"signatures: verifying 1,000 decisions {signing[1]:.3f} s of CPU "
              f"(signing them {signing[0]:.3f} s)")
    print(f"audit of the first run's {audit['records']:.0f} chained records "
          f"({'verified' if audit['ok'] else 'NOT VERIFIED'}), per 1,000 decisions: "
          f"reading {audit['read']:.3f} s, verifying {audit['verify']:.3f} s of CPU "
          "(chain, signatures, supersessions)\n")
    print(f"{'workers':>7} {'decisions/s':>12} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'workers CPU s/1000':>19}   split (s/1000 per process)   mongo  publisher"
          "  mongo waited")
    print("-" * 124)
    for r in [run for run, _ in pairs] + runs[1:]:
        split = " + ".join(f"{c:.3f}" for c in r.worker_cpu)
        print(f"{r.workers:>7} {r.burst['rate']:>12.0f} {r.burst['p50']:>8.0f} "
              f"{r.burst['p99']:>8.0f} {sum(r.worker_cpu):>19.3f}   {split:<28} "
              f"{r.cpu.get('mongo', float('nan')):>5.3f}  {r.cpu.get('publisher', 0):>9.3f}"
              f"  {r.waited.get('mongo', float('nan')):>12.3f}")
    print("-" * 124)
    paced = runs[0].paced
    if paced:
        print(f"paced, {args.paced_rate:.0f}/s offered, 2,000 decisions, {runs[0].workers} "
              f"worker(s): publish -> persisted p50 {paced['p50']:.1f} ms, "
              f"p99 {paced['p99']:.1f} ms")
    ratios = []
    for i, (run, bare) in enumerate(pairs, 1):
        ratios.append(run.burst["rate"] / bare["rate"])
        print(f"pair {i}: recorder {run.burst['rate']:.0f}/s, then bare insert_many (same "
              f"docs, same indexes) {bare['rate']:.0f}/s (median of "
              f"{', '.join(f'{x:.0f}' for x in bare['runs'])}; CPU s/1000: "
              f"{shown(bare['cpu'])}): {ratios[-1]:.2f}")
    print(f"recorder / bare (same indexes), {runs[0].workers} worker: "
          f"{statistics.median(ratios):.2f} (median of {len(ratios)} pairs; "
          f"{min(ratios):.2f} to {max(ratios):.2f})")
    for i, (run, bare) in enumerate(pairs, 1):
        if "mongo" in run.waited and "mongo" in bare["waited"]:
            cores = os.cpu_count() or 1
            print(f"pair {i}: the server waited for a CPU "
                  f"{_share(run.waited['mongo'], run.burst['rate'])} of the recorder's burst, "
                  f"{_share(bare['waited']['mongo'], bare['rate'])} of the bare insert's; "
                  "the host took "
                  f"{_share(run.waited.get('steal', 0) / cores, run.burst['rate'])} of the "
                  "machine's CPU time in the burst (steal)")
    for r in runs:
        worst = max(r.worker_cpu) if r.worker_cpu else float("nan")
        print(f"  {r.workers} worker(s): the busiest process spends {worst:.3f} s per 1,000 "
              f"decisions; on a core of its own each would carry about "
              f"{1000 / worst:.0f} decisions/s of the recorder's work, "
              f"{r.workers * 1000 / worst if r.workers else 0:.0f}/s together, as long as "
              "MongoDB keeps up (projection)")


def _share(per_1000: float, rate: float) -> str:
    """Seconds per 1,000 decisions at `rate` decisions/s, as a share of the wall time."""
    return f"{per_1000 * rate / 1000:.0%}"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--decisions", type=int, default=10_000)
    ap.add_argument("--plans", type=int, default=60)
    ap.add_argument("--workers", default="1,2,3")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--bare-runs", type=int, default=1,
                    help="bare insert runs after each recorder run of a pair (median)")
    ap.add_argument("--pairs", type=int, default=3,
                    help="recorder run + bare insert pairs for the first worker count")
    ap.add_argument("--keep", metavar="DIR", default=None,
                    help="keep the servers' data and the workers' logs under DIR")
    ap.add_argument("--existing-plans", type=int, default=0,
                    help="plans' records stored before each run (a store that ran a while)")
    ap.add_argument("--paced-rate", type=float, default=200.0,
                    help="offered rate (decisions/s) of the latency run (0: none)")
    ap.add_argument("--checks", type=int, default=20,
                    help="checked invariants in force in every run (0: none)")
    ap.add_argument("--unsigned", action="store_true",
                    help="publish unsigned, workers without principals (as before signing)")
    return ap.parse_args()


async def main() -> None:
    args = parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    batch = Settings.from_env().recorder_batch_size  # the workers' own, RECORDER_BATCH_SIZE

    kept = contextlib.nullcontext(tempfile.mkdtemp(dir=args.keep)) if args.keep else None
    with kept or tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        if args.keep:
            print(f"servers' data and the workers' logs kept in {data}", flush=True)
        ns = start_nats(data, port=free_port())
        ms = start_mongo(data, port=free_port())
        key, principals = trust_setup(data)
        signer = None if args.unsigned else key
        signing = None if signer is None else verification_cost(
            signer, principals, interleaved(args.plans, 100, 99))
        try:
            pairs = []
            for j in range(max(1, args.pairs)):
                db_name = f"bench_recorder_{counts[0]}_pair{j}"
                run = await one_run(counts[0], ns.url, ms, args, data, seed=1_000_000 * j,
                                    signer=signer, principals=principals, db_name=db_name)
                pairs.append((run, await bare_insert(
                    ms.url, db_name, batch, args.bare_runs,
                    lambda: cpu_seconds({"mongo": ms.process.pid, "client": os.getpid()}),
                    waited=lambda: waited_seconds({"mongo": ms.process.pid}), sent=run.sent)))
            runs = [pairs[0][0]] + [
                await one_run(k, ns.url, ms, args, data, seed=100_000 * i, signer=signer,
                              principals=principals, db_name=f"bench_recorder_{k}")
                for i, k in enumerate(counts) if i > 0]
            first = f"bench_recorder_{counts[0]}_pair0"
            keys = principal_keys(principals if signer is not None else None)
            audit = await audit_cost(ms.url, first, keys, runs[0].sent)
        finally:
            ns.stop()
            ms.stop()
    report(args, runs, pairs, batch, signing=signing, audit=audit)
    eval_s, evaluations = evaluation_cost(checked_invariants(args.checks),
                                          interleaved(args.plans, 100, 99))
    print(f"\nchecked invariants: {args.checks} in force in every run; evaluating them on "
          f"1,000 decisions {eval_s:.3f} s of CPU ({evaluations} evaluations)")


if __name__ == "__main__":
    asyncio.run(main())
