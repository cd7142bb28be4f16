"""Recorder throughput and latency, end to end, against a bare insert_many baseline.

    python bench/bench_recorder.py [--decisions 10000] [--plans 10] [--workers 1]

Starts its own nats-server and secantusd-py (free ports, temp dir) and `python -m
workers` processes, publishes decision trees with a plain nats-py client and times each
decision from publish to its `decisions.persisted` event. Then it inserts the very
documents the recorder stored into a fresh collection with the same indexes, with
`insert_many` in batches of the recorder's batch size, on the same server in the same
run (BARE_RUNS times, the median counts): the ratio is the recorder's rate over that
bare rate. Last, the CPU time each process spent per 1,000 decisions in the burst and
in the bare inserts (from /proc).

Checked invariants are in force (`--checks N`, default 20; 0 for none): N GLOBAL
invariants with a CEL check each, all kept by the decisions sent, so the recorder's gate
evaluates every one on every decision (contracts.invariants.gate). The cost of that
evaluation, per 1,000 decisions, is timed in this process on the very decisions sent
(a Gate over the same rule set, as the recorder builds one per batch).

Signatures are on (`--unsigned` turns them off): the workers run with a principals file
and REQUIRE_SIGNATURES=1, and every decision is signed by an agent's key, as the client
library signs it. The cost of verifying, per 1,000 decisions, is timed in this process
on the very messages sent (the worker's check: contracts.trust.policy.FamilyTrust).
Every record is chained (its link computed in the recorder's transaction); after the
runs, the burst's plans are audited as `agents audit verify` does (read from MongoDB as
export lines, then the chain, each kept signature and each supersession checked), and
that cost per 1,000 decisions is printed too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats
from pymongo import AsyncMongoClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bootstrap.settings import Settings  # noqa: E402
from contracts.decisions.model import Decision  # noqa: E402
from contracts.decisions.subjects import DECISIONS_STREAM, RECORDER_DURABLE  # noqa: E402
from contracts.invariants.evaluation import Budget  # noqa: E402
from contracts.invariants.gate import Gate, GateInputs  # noqa: E402
from contracts.invariants.model import Invariant, InvariantScope  # noqa: E402
from contracts.invariants.rules import RuleSet  # noqa: E402
from contracts.recording.families import RECORDED  # noqa: E402
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
from store.database import DECISIONS, connect, ensure_indexes  # noqa: E402
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


def cpu_per_1000(before: dict[str, float], after: dict[str, float], n: int) -> str:
    if not before or not after:
        return "n/a (no /proc)"
    return ", ".join(f"{k} {(after[k] - before[k]) * 1000 / n:.2f}" for k in before)


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


def interleaved(plans: int, per_plan: int, seed: int) -> list[dict[str, Any]]:
    trees = [plan_tree(per_plan, seed=seed + s) for s in range(plans)]
    return [t[i] for i in range(per_plan) for t in trees]


async def wait_ready(url: str, expected: int) -> None:
    nc = await nats.connect(url)
    js = nc.jetstream()
    for _ in range(300):
        try:
            info = await js.consumer_info(DECISIONS_STREAM, RECORDER_DURABLE)
            if (info.num_waiting or 0) >= expected:
                break
        except Exception:  # not created yet
            pass
        await asyncio.sleep(0.1)
    await nc.close()


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

    async def on_persisted(msg: Any) -> None:
        persisted[json.loads(msg.data)["decision_id"]] = time.perf_counter()
        if len(persisted) == len(sent):
            done.set()

    await nc.subscribe("decisions.persisted.>", cb=on_persisted)
    start = time.perf_counter()
    futures = []
    for i, d in enumerate(sent):
        if rate:
            await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
        published[d["decision_id"]] = time.perf_counter()
        futures.append(await js.publish_async(subject(d), encode(d),
                                              headers=signed_headers(signer, d)))
    await asyncio.gather(*futures)
    await asyncio.wait_for(done.wait(), timeout=600)
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


BARE_RUNS = 3
"""The same-index baseline is timed this many times (a fresh collection each) and its
median taken: on a shared machine one short run moves with the other load more than
the recorder's longer one does. Each run is printed."""


async def bare_insert(mongo_uri: str, db_name: str, batch: int,
                      cpu: Callable[[], dict[str, float]]) -> dict[str, Any]:
    # The workers' own client options (w: majority, j: true...): same durability asked.
    client: AsyncMongoClient[dict[str, Any]] = connect(mongo_uri)
    source = client[db_name][DECISIONS]
    docs = await source.find().sort([("plan_id", 1), ("sequence_number", 1)]).to_list()
    out: dict[str, Any] = {}
    for name, indexed, runs in (("bare_indexed", True, BARE_RUNS),
                                ("bare_no_index", False, 1)):
        rates, cpu0 = [], cpu()
        for _ in range(runs):
            db = client[f"{db_name}_{name}"]
            if indexed:
                await ensure_indexes(db)
            start = time.perf_counter()
            for i in range(0, len(docs), batch):
                await db[DECISIONS].insert_many(docs[i:i + batch], ordered=False)
            rates.append(len(docs) / (time.perf_counter() - start))
            await client.drop_database(db.name)
        out[name], out[f"{name}_runs"] = statistics.median(rates), rates
        out[f"{name}_cpu"] = cpu_per_1000(cpu0, cpu(), len(docs) * runs)
    await client.close()
    return out


def start_workers(n: int, env: dict[str, str], logdir: Path) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-m", "workers"], cwd=ROOT, env=env,
                             stdout=(logdir / f"worker{i}.log").open("wb"),
                             stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
            for i in range(n)]


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--decisions", type=int, default=10_000)
    ap.add_argument("--plans", type=int, default=10)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--paced-rate", type=float, default=200.0,
                    help="offered rate (decisions/s) of the latency run")
    ap.add_argument("--checks", type=int, default=20,
                    help="checked invariants in force (0: none)")
    ap.add_argument("--unsigned", action="store_true",
                    help="publish unsigned, workers without principals (as before signing)")
    return ap.parse_args()


def print_header(args: argparse.Namespace, batch: int, eval_s: float, evaluations: int,
                 signing: tuple[float, float] | None) -> None:
    """The run's setting, and what checks and signatures cost per 1,000 decisions
    (`signing`: seconds to sign and to verify them; None when unsigned)."""
    print(f"\nRecorder bench: {args.decisions} decisions in {args.plans} plans, "
          f"{args.workers} worker process(es), batch {batch}, 2-core machine, "
          "nats-server + secantusd-py on loopback, "
          f"{'unsigned' if signing is None else 'signed, REQUIRE_SIGNATURES=1'}, "
          f"{args.checks} checked invariants\n")
    print(f"checked invariants: {args.checks} in force; evaluating them on 1,000 decisions "
          f"{eval_s:.3f} s of CPU ({evaluations} evaluations)\n")
    if signing is not None:
        print(f"signatures: verifying 1,000 decisions {signing[1]:.3f} s of CPU "
              f"(signing them {signing[0]:.3f} s)")


async def main() -> None:
    args = parse_args()
    batch = Settings.from_env().recorder_batch_size  # the workers' own, RECORDER_BATCH_SIZE

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        ns = start_nats(data, port=free_port())
        ms = start_mongo(data, port=free_port())
        db_name = "bench_recorder"
        env = {**os.environ, "NATS_URL": ns.url, "MONGODB_URI": ms.url, "MONGODB_DB": db_name,
               "PYTHONPATH": str(ROOT)}
        key, principals = trust_setup(data)
        signer = None if args.unsigned else key
        if signer is not None:
            env |= {"LEDGER_PRINCIPALS": str(principals), "REQUIRE_SIGNATURES": "1"}
            sign_s, verify_s = verification_cost(signer, principals,
                                                 interleaved(args.plans, 100, 99))
        invariants = await add_invariants(ms.url, db_name, checked_invariants(args.checks))
        procs = start_workers(args.workers, env, data)
        try:
            await wait_ready(ns.url, args.workers)
            per_plan = args.decisions // args.plans
            pids = {**{f"worker{i}": p.pid for i, p in enumerate(procs)},
                    "mongo": ms.process.pid, "nats": ns.process.pid, "publisher": os.getpid()}
            sent = interleaved(args.plans, per_plan, 0)
            eval_s, evaluations = evaluation_cost(invariants, sent)
            cpu0 = cpu_seconds(pids)
            burst = await run_load(ns.url, sent, None, signer)
            cpu1 = cpu_seconds(pids)
            paced_n = min(2_000, args.decisions)
            paced = await run_load(ns.url, interleaved(args.plans, paced_n // args.plans, 10_000),
                                   args.paced_rate, signer)
            keys = principal_keys(principals if signer is not None else None)
            audit = await audit_cost(ms.url, db_name, keys, sent)
            server = {"mongo": ms.process.pid, "client": os.getpid()}
            bare = await bare_insert(ms.url, db_name, batch,
                                     lambda: cpu_seconds(server))
        finally:
            for p in procs:
                p.terminate()
                p.wait()
            ns.stop()
            ms.stop()

    print_header(args, batch, eval_s, evaluations,
                 None if signer is None else (sign_s, verify_s))
    print(f"audit of the burst's {audit['records']:.0f} chained records "
          f"({'verified' if audit['ok'] else 'NOT VERIFIED'}), per 1,000 decisions: "
          f"reading {audit['read']:.3f} s, verifying {audit['verify']:.3f} s of CPU "
          "(chain, signatures, supersessions)\n")
    print(f"{'run':<44}{'decisions/s':>12}{'p50 ms':>10}{'p99 ms':>10}")
    print("-" * 76)
    print(f"{'burst: publish all, publish -> persisted':<44}{burst['rate']:>12.0f}"
          f"{burst['p50']:>10.0f}{burst['p99']:>10.0f}")
    print(f"{f'paced: {args.paced_rate:.0f}/s offered, {paced_n} decisions':<44}"
          f"{paced['rate']:>12.0f}{paced['p50']:>10.1f}{paced['p99']:>10.1f}")
    print(f"{'bare insert_many, same docs, same indexes':<44}{bare['bare_indexed']:>12.0f}"
          f"   (median of {', '.join(f'{r:.0f}' for r in bare['bare_indexed_runs'])})")
    print(f"{'bare insert_many, same docs, _id index only':<44}{bare['bare_no_index']:>12.0f}")
    print("-" * 76)
    print(f"recorder / bare (same indexes): {burst['rate'] / bare['bare_indexed']:.0%}   "
          f"recorder / bare (_id only): {burst['rate'] / bare['bare_no_index']:.0%}")
    print("\nCPU seconds per 1,000 decisions")
    print(f"  burst:                     {cpu_per_1000(cpu0, cpu1, args.decisions)}")
    print(f"  bare, same indexes:        {bare['bare_indexed_cpu']}")
    print(f"  bare, _id index only:      {bare['bare_no_index_cpu']}")


if __name__ == "__main__":
    asyncio.run(main())
