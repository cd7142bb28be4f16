"""The console's first render of a 10,000-decision plan: how long, and how many bytes.

    python bench/bench_console.py [--decisions 10000] [--runs 5] [--no-browser]

Starts its own nats-server and secantusd-py (free ports, temp dir), writes one plan of
`--decisions` decisions straight through the store's document mapping (insert_many: the
recorder is not what is measured here), and serves the console in this process. Then:

- API: the requests the plan page makes before its first paint (the plan's summary, the
  roots, the root's children), timed with httpx, and the bytes of their bodies; beside
  them the bytes the whole current tree would be as JSON (what a page that loaded the
  plan at once would receive).
- API: the dry-run highlight past the reply's first 100 IDs: the page asks which of the
  nodes it drew (the root and its children) a revert of the root's biggest branch
  affects; the first ask walks the plan, the next one is answered from the
  kept walk.
- Browser (Debian's chromium, when present): from navigation to the first node below
  the root drawn, and the bytes the page transferred (Resource Timing: every asset and
  API body, the live stream excepted).

Timings on a shared machine are noisy: medians over `--runs`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import nats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from console.affected import AffectedSets  # noqa: E402
from console.app import run_console  # noqa: E402
from console.config import ConsoleConfig  # noqa: E402
from console.deps import Deps  # noqa: E402
from contracts.decisions.model import Decision  # noqa: E402
from deploy.embedded import free_port, start_mongo, start_nats  # noqa: E402
from store.database import DECISIONS, PLANS, connect, ensure_indexes  # noqa: E402
from store.decisions import to_document  # noqa: E402
from store.mongo_store import MongoStore  # noqa: E402
from tests.console_deps import deps_over  # noqa: E402
from tests.factories import decision, root  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
HAVE_CHROMIUM = Path(CHROMIUM).exists()
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VERBOSE = "--verbose" in sys.argv
BRANCHING = ["strategy_choice", "implementation_choice", "resource_selection",
             "tool_invocation", "error_recovery", "validation_response"]


def build_plan(size: int, seed: int = 1) -> list[Decision]:
    """A tree shaped like an agent's: a root with a few strategies, each fanning out."""
    rng = random.Random(seed)
    first = root()
    out = [first]
    for i in range(1, size):
        # Parents among the recent ones, so the tree is deep as well as wide.
        parent = out[max(0, len(out) - 1 - int(rng.expovariate(1 / 40)))]
        out.append(decision(first["plan_id"], parent["decision_id"], rng.choice(BRANCHING),
                            question=f"Choice {i}?", chosen_option=f"Option {i}"))
    return [Decision.model_validate({**d, "sequence_number": n}) for n, d in enumerate(out)]


async def api_first_render(url: str, plan_id: str, root_id: str) -> tuple[float, int, int]:
    """Seconds and body bytes of the plan page's first requests; request count."""
    paths = [f"/api/plans/{plan_id}", f"/api/plans/{plan_id}/tree?limit=100&superseded=0",
             f"/api/plans/{plan_id}/tree?limit=100&superseded=0&parent={root_id}"]
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        start = time.perf_counter()
        sizes = []
        for p in paths:  # the page makes them one after another, as here
            t = time.perf_counter()
            r = await http.get(p)
            r.raise_for_status()
            sizes.append(len(r.content))
            if VERBOSE:
                print(f"  {p[:70]:70} {(time.perf_counter() - t) * 1000:6.0f} ms")
        return time.perf_counter() - start, sum(sizes), len(paths)


def biggest_branch(plan: list[Decision]) -> str:
    """The root's child with the most decisions below it (parents come first)."""
    size = {d.decision_id: 1 for d in plan}
    for d in reversed(plan[1:]):
        if d.parent_decision_id in size and d.parent_decision_id != plan[0].decision_id:
            size[d.parent_decision_id] += size[d.decision_id]
    below = [d for d in plan if d.parent_decision_id == plan[0].decision_id]
    return max(below, key=lambda d: size[d.decision_id]).decision_id


async def api_affected(url: str, deps: Deps, target: str, drawn: list[str]
                       ) -> tuple[float, float, int, int]:
    """Seconds of a first (walking) and a second (kept) /affected ask, body bytes, and
    how many decisions the walk found affected."""
    deps.affected = AffectedSets()
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        times = []
        for _ in range(2):
            t = time.perf_counter()
            r = await http.post(f"/api/decisions/{target}/affected", json={"ids": drawn})
            r.raise_for_status()
            times.append(time.perf_counter() - t)
        return times[0], times[1], len(r.content), int(r.json()["affected_count"])


async def browser_first_render(url: str, plan_id: str, root_id: str) -> tuple[float, int]:
    from playwright.async_api import async_playwright  # noqa: PLC0415  # an optional extra

    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            page = await b.new_page()
            start = time.perf_counter()
            await page.goto(f"{url}/#/plan/{plan_id}")
            await page.wait_for_selector(f'.node[data-id="{root_id}"] .toggle:text("▾")',
                                         timeout=60_000)
            await page.locator("ul.tree ul li .node").first.wait_for(timeout=60_000)
            seconds = time.perf_counter() - start
            transferred = await page.evaluate("""() => {
                const nav = performance.getEntriesByType("navigation")[0];
                const res = performance.getEntriesByType("resource")
                    .filter(e => !e.name.includes("/api/events"));
                return (nav ? nav.encodedBodySize : 0)
                    + res.reduce((n, e) => n + e.encodedBodySize, 0);
            }""")
            return seconds, int(transferred)
        finally:
            await b.close()


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-console-") as tmp:
        nats_server = start_nats(Path(tmp), port=free_port())
        mongo = start_mongo(Path(tmp), port=free_port())
        try:
            await run(args, nats_server.url, mongo.url)
        finally:
            mongo.stop()
            nats_server.stop()


async def run(args: argparse.Namespace, nats_url: str, mongo_url: str) -> None:
    client = connect(mongo_url)
    db = client["bench_console"]
    await ensure_indexes(db)
    plan = build_plan(args.decisions)
    t0 = time.perf_counter()
    docs = [to_document(d) for d in plan]
    for i in range(0, len(docs), 1000):
        await db[DECISIONS].insert_many(docs[i:i + 1000])
    # The plan's counter document, as the recorder leaves it.
    await db[PLANS].insert_one({"_id": plan[0].plan_id, "next_sequence": len(plan),
                                "status": "active", "epoch": 0,
                                "created_at": plan[0].created_at})
    print(f"built a {len(plan):,}-decision plan in {time.perf_counter() - t0:.1f}s")
    plan_id, root_id = plan[0].plan_id, plan[0].decision_id
    whole = sum(len(d.model_dump_json()) for d in plan) + len(plan) + 1

    nc = await nats.connect(nats_url)
    deps = deps_over(MongoStore(db), nc)

    @asynccontextmanager
    async def connected() -> Any:
        yield deps

    config = ConsoleConfig(port=free_port())
    stop, ready = asyncio.Event(), asyncio.Event()
    server = asyncio.create_task(run_console(config, connected, stop, ready.set))
    await asyncio.wait_for(ready.wait(), 20)
    url = config.url.rstrip("/")
    try:
        api = [await api_first_render(url, plan_id, root_id) for _ in range(args.runs)]
        below = [d.decision_id for d in plan if d.parent_decision_id == root_id]
        drawn = [root_id, *below[:100]]
        affected = [await api_affected(url, deps, biggest_branch(plan), drawn)
                    for _ in range(args.runs)]
        browser: list[tuple[float, int]] = []
        if not args.no_browser and HAVE_CHROMIUM:
            browser = [await browser_first_render(url, plan_id, root_id)
                       for _ in range(args.runs)]
    finally:
        stop.set()
        await server
        await nc.close()
        await client.close()

    rows = [("API: summary + roots + root's children",
             f"{statistics.median(s for s, _, _ in api) * 1000:.0f} ms",
             f"{api[0][1]:,} B", f"{api[0][2]} requests")]
    rows.append(("API: affected among drawn, first ask (walks)",
                 f"{statistics.median(a[0] for a in affected) * 1000:.0f} ms",
                 f"{affected[0][2]:,} B", f"{affected[0][3]:,} affected, {len(drawn)} asked"))
    rows.append(("API: affected among drawn, next asks (kept)",
                 f"{statistics.median(a[1] for a in affected) * 1000:.0f} ms",
                 f"{affected[0][2]:,} B", "the same walk, kept 60 s"))
    if browser:
        rows.append(("browser: navigation to first level drawn",
                     f"{statistics.median(s for s, _ in browser) * 1000:.0f} ms",
                     f"{statistics.median(b for _, b in browser):,.0f} B",
                     "HTML, CSS, JS, API"))
    rows.append(("the whole current tree as JSON (not sent)", "-", f"{whole:,} B",
                 f"{len(plan):,} decisions"))
    width = max(len(r[0]) for r in rows)
    print(f"\nfirst render of a {len(plan):,}-decision plan, median of {args.runs} runs")
    print(f"{'':{width}}  {'time':>9}  {'bytes':>13}  note")
    for name, t, size, note in rows:
        print(f"{name:{width}}  {t:>9}  {size:>13}  {note}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--decisions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="Time each API request.")
    asyncio.run(main(parser.parse_args()))
