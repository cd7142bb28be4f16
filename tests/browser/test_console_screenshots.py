"""The README's pictures of the console (docs/console/*.png), taken of a realistic plan.

Runs only with CONSOLE_SCREENSHOTS=<dir> (see docs/console.md): the other browser tests
record hostile text on purpose (and check it never runs), which is no picture of the
console an operator would recognise. This one records three ordinary plans, corrects
one from the tree, reports a violation and leaves a dead letter, and saves each main
page; its assertions only make sure each page shows what it should before the shot.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import nats
import pytest
from playwright.async_api import Page, expect
from pymongo.asynchronous.database import AsyncDatabase

from contracts.shared.ids import new_id
from store.database import Document
from tests.browser.conftest import browser, page, shot
from tests.factories import decision
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import Agents, agents, cli_workers
from tests.integration.console_support import Console, console
from tests.integration.wire import publish_all, wait_for_count

__all__ = ["agents", "browser", "cli_workers", "console", "page"]

pytestmark = [pytest.mark.browser, pytest.mark.e2e,
              pytest.mark.skipif(not os.environ.get("CONSOLE_SCREENSHOTS"),
                                 reason="only to refresh docs/console/ (CONSOLE_SCREENSHOTS)")]

TIMEOUT = 30_000


def _d(plan: str, parent: Any, kind: str, question: str, chosen: str, rationale: str,
       confidence: float, files: list[str], alternatives: list[str]) -> dict[str, Any]:
    return decision(plan, str(parent["decision_id"]), kind, question=question,
                    chosen_option=chosen, rationale=rationale, confidence_score=confidence,
                    alternatives_considered=alternatives,
                    actor_reasoning=f"Considered {', '.join(alternatives)}; chose: {chosen}.",
                    artifacts_produced=[{"artifact_path": f, "artifact_type": "file"}
                                        for f in files])


def _root(goal: str, **fields: Any) -> dict[str, Any]:
    return decision(new_id(), None, "prompt_definition", question="What should the plan achieve?",
                    chosen_option=goal, artifacts_produced=[], **fields)


def rate_limiting() -> list[dict[str, Any]]:
    """The plan the pictures are about."""
    r = _root("Add rate limiting to the public API",
              rationale="Two customers' batch jobs took the API down last week.")
    p = str(r["plan_id"])
    where = _d(p, r, "strategy_choice", "Where should limits be enforced?",
               "At the API gateway (Envoy), per API key",
               "One place for every service; keys identify the customer.", 0.86,
               [], ["In each service", "At the load balancer"])
    algo = _d(p, where, "implementation_choice", "Which algorithm?",
              "Token bucket: 100 requests/min, bursts of 20",
              "Simple, and Envoy's local rate limit filter has it built in.", 0.74,
              [], ["Fixed window", "Sliding window log"])
    config = _d(p, algo, "tool_invocation", "Write the Envoy filter",
                "envoy/filters/ratelimit.yaml",
                "Generated from the per-plan limits table.", 0.9,
                ["envoy/filters/ratelimit.yaml"], ["Hand-written config"])
    load = _d(p, config, "validation_response", "Do the load tests pass?",
              "p99 41 ms at 2,000 rps; 429s at the limit as expected",
              "k6 run against staging, 10 minutes.", 0.95,
              ["reports/k6-ratelimit.json"], ["Skip the load test"])
    store = _d(p, where, "resource_selection", "Where do the counters live?",
               "The shared Redis cluster (cache-prod)",
               "Already replicated and monitored; 3 ms away from every gateway.", 0.81,
               [], ["A new Redis instance", "Gateway memory"])
    tell = _d(p, r, "strategy_choice", "How are clients told?",
              "429 with Retry-After, and a changelog entry",
              "What the HTTP spec and our SDKs already handle.", 0.88,
              [], ["Silent throttling", "Email customers"])
    docs = _d(p, tell, "tool_invocation", "Document the limits",
              "docs/api/rate-limits.md", "Linked from the 429 body.", 0.92,
              ["docs/api/rate-limits.md"], ["Changelog only"])
    return [r, where, algo, config, load, store, tell, docs]


def small(goal: str, steps: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    r = _root(goal)
    p = str(r["plan_id"])
    out = [r]
    for kind, question, chosen in steps:
        out.append(_d(p, out[-1], kind, question, chosen, "Agreed with the owner.", 0.8,
                      [], ["Leave it as it is"]))
    return out


def node(page: Page, decision_id: object) -> Any:
    return page.locator(f'.node[data-id="{decision_id}"]')


async def test_screenshots_of_a_realistic_plan(
        cli_workers: InProcessWorkers, agents: Agents, console: Console, page: Page, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    js = nc.jetstream()
    others = [
        small("Migrate invoices to PostgreSQL 16", [
            ("strategy_choice", "How to move the data?", "Logical replication, then cut over"),
            ("tool_invocation", "Create the subscription", "migrations/0042_invoices_sub.sql"),
            ("validation_response", "Row counts match?", "2,418,733 rows on both sides")]),
        small("Fix the flaky checkout test", [
            ("error_recovery", "Why does it fail one run in 20?",
             "A race on the cart fixture's teardown"),
            ("implementation_choice", "How to fix it?",
             "Await the teardown before the next test")]),
    ]
    plan = rate_limiting()
    for tree in [*others, plan]:
        await publish_all(js, tree)
    total = sum(len(t) for t in [*others, plan])
    assert await wait_for_count(db, "decisions", total, timeout=30) == total
    plan_id = str(plan[0]["plan_id"])
    await plans_and_a_revert(page, console, plan_id, plan)
    await an_append_and_the_corrections(page, console, plan_id, str(plan[7]["decision_id"]))
    await invariants_and_dead_letters(page, console, agents, nc, db, plan_id,
                                      str(plan[5]["decision_id"]), str(plan[6]["decision_id"]))


async def plans_and_a_revert(page: Page, console: Console, plan_id: str,
                             plan: list[dict[str, Any]]) -> None:
    algo, config = str(plan[2]["decision_id"]), str(plan[3]["decision_id"])

    await page.goto(console.url + "/#/plans")
    await expect(page.locator(f'#plans tr[data-plan="{plan_id}"]')).to_be_visible(
        timeout=TIMEOUT)
    await expect(page.locator("#plans tbody tr")).to_have_count(3)
    await expect(page.locator("#live")).to_have_class("live on", timeout=TIMEOUT)
    await shot(page, "plans")

    # A revert of the algorithm, dry run first.
    await page.goto(f"{console.url}/#/plan/{plan_id}/{algo}")
    await expect(page.locator("#decision-chosen")).to_have_text(
        "Token bucket: 100 requests/min, bursts of 20", timeout=TIMEOUT)
    await page.locator("#correct-chosen").fill("Sliding window log in Redis")
    await page.locator("#correct-guidance").fill(
        "Token buckets let a client send 120 requests across a minute boundary; "
        "use a sliding window so the limit holds for any 60 seconds.")
    await page.locator("#dry-run").click()
    await expect(page.locator("#report-affected")).to_have_text("3", timeout=TIMEOUT)
    await expect(page.locator(".node.affected")).to_have_count(2)
    await page.locator("#report").scroll_into_view_if_needed()
    await shot(page, "dry-run")

    page.once("dialog", lambda dialog: dialog.accept())
    await page.locator("#confirm").click()
    await expect(page.locator("#applied")).to_be_visible(timeout=60_000)
    await expect(page.locator(".node", has_text="Sliding window log in Redis")).to_be_visible(
        timeout=TIMEOUT)
    await page.locator("#show-superseded").check()
    await expect(node(page, algo)).to_have_class(re.compile(r"\bsuperseded\b"),
                                                 timeout=TIMEOUT)
    await page.goto(f"{console.url}/#/plan/{plan_id}")
    await page.locator("#show-superseded").check()
    await node(page, algo).locator(".toggle").click(timeout=TIMEOUT)
    await expect(node(page, config)).to_be_visible(timeout=TIMEOUT)
    await shot(page, "tree")


async def an_append_and_the_corrections(page: Page, console: Console, plan_id: str,
                                        docs: str) -> None:
    # An append on the docs: a child plan to publish the limits in the portal.
    await page.goto(f"{console.url}/#/plan/{plan_id}/{docs}")
    await page.locator("#correct-mode").select_option("append")
    await page.locator("#correct-guidance").fill(
        "Also publish the limits in the developer portal, per plan tier.")
    await page.locator("#dry-run").click()
    await expect(page.locator("#confirm")).to_be_enabled(timeout=TIMEOUT)
    page.once("dialog", lambda dialog: dialog.accept())
    await page.locator("#confirm").click()
    await expect(page.locator("#applied")).to_be_visible(timeout=60_000)

    listed = await (await page.request.get(
        f"{console.url}/api/corrections?plan={plan_id}")).json()
    revert = next(c for c in listed["corrections"] if c["mode"] == "revert")
    await page.goto(f"{console.url}/#/correction/{revert['correction_id']}")
    await expect(page.locator("#diff")).to_contain_text("superseded (3)", timeout=TIMEOUT)
    await shot(page, "correction")
    await page.goto(f"{console.url}/#/corrections")
    await expect(page.locator("#corrections tbody tr")).to_have_count(2, timeout=TIMEOUT)
    await shot(page, "corrections")


async def invariants_and_dead_letters(page: Page, console: Console, agents: Agents,
                                      nc: nats.NATS, db: AsyncDatabase[Document],
                                      plan_id: str, store: str, tell: str) -> None:
    js = nc.jetstream()
    # Invariants: a global rule, the plan's own stricter one, and a violation of it.
    await agents.ok("invariant", "add", "no-cache-flush", "--description",
                    "Never flush a shared cache")
    inv = (await agents.ok("invariant", "add", "no-cache-flush", "--description",
                           "Never FLUSHDB on cache-prod; expire keys by prefix instead",
                           "--plan", plan_id, "--json")).json
    await agents.ok("invariant", "add", "load-tested", "--description",
                    "Every gateway change passes the k6 suite before rollout")
    vid = new_id()
    await js.publish(f"invariants.violations.{plan_id}", json.dumps({
        "violation_id": vid, "invariant_id": inv["id"], "plan_id": plan_id,
        "decision_id": store, "severity": "error",
        "details": "The counter reset step ran FLUSHDB on cache-prod (db 3)"}).encode(),
        headers={"Nats-Msg-Id": vid})
    # A decision the recorder refuses: its confidence is out of range.
    bad = decision(plan_id, tell, "tool_invocation", question="Notify the SDK team?",
                   chosen_option="Open an issue in sdk-js", confidence_score=1.4)
    await publish_all(js, [bad])
    assert await wait_for_count(db, "invariant_violations", 1, timeout=30) == 1
    assert await wait_for_count(db, "dead_letters", 1, timeout=30) == 1

    await page.goto(f"{console.url}/#/invariants/{plan_id}")
    await expect(page.locator(f'#violations tr[data-violation="{vid}"]')).to_contain_text(
        "blocking", timeout=TIMEOUT)
    await shot(page, "invariants")
    await page.goto(f"{console.url}/#/dead-letters")
    await expect(page.locator("#dead-letters tbody tr")).to_have_count(1, timeout=TIMEOUT)
    await shot(page, "dead-letters")
