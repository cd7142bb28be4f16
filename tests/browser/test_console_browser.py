"""The console in a real headless Chromium against the real stack (NATS, MongoDB, the
workers): the console's scenarios (docs/console.md), as an operator clicks through them."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nats
import pytest
from playwright.async_api import Page, expect
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from contracts.shared.ids import new_id
from deploy.embedded import ManagedServer
from store.database import Document
from tests.browser.conftest import browser, page
from tests.bulk import load_plan
from tests.factories import decision, root
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import Agents, agents, cli_workers
from tests.integration.console_support import Console, console, held_executing, wide_plan
from tests.integration.wire import publish_all, wait_for_count

__all__ = ["agents", "browser", "cli_workers", "console", "page"]

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

TIMEOUT = 20_000
XSS_OPTION = '<img src=x onerror="window.__xss=1">Use Postgres'
XSS_RATIONALE = "<script>window.__xss=2</script>Because"


def small_plan() -> list[dict[str, object]]:
    """root -> A -> (A1, A2 -> A2a), root -> B: reverting A affects A, A1, A2, A2a."""
    r = root()
    p = str(r["plan_id"])
    a = decision(p, str(r["decision_id"]), "strategy_choice", question="Storage?",
                 chosen_option=XSS_OPTION, rationale=XSS_RATIONALE)
    a1 = decision(p, str(a["decision_id"]), "implementation_choice", question="Driver?",
                  chosen_option="asyncpg")
    a2 = decision(p, str(a["decision_id"]), "tool_invocation", question="Migrate?",
                  chosen_option="alembic upgrade")
    a2a = decision(p, str(a2["decision_id"]), "validation_response", question="Tests?",
                   chosen_option="all green")
    b = decision(p, str(r["decision_id"]), "resource_selection", question="Cache?",
                 chosen_option="redis")
    return [r, a, a1, a2, a2a, b]


async def record(nc: nats.NATS, db: AsyncDatabase[Document],
                 tree: list[dict[str, object]]) -> None:
    await publish_all(nc.jetstream(), tree)
    plan_id = tree[0]["plan_id"]
    assert await wait_for_count(db, "decisions", len(tree), timeout=30,
                                query={"plan_id": plan_id}) >= len(tree)


def node(page: Page, decision_id: object) -> object:
    return page.locator(f'.node[data-id="{decision_id}"]')


async def test_live_plan_decision_dry_run_and_apply(
        cli_workers: InProcessWorkers, console: Console, page: Page, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    await page.goto(console.url + "/#/plans")
    await expect(page.locator("#plans")).to_be_visible(timeout=TIMEOUT)
    await expect(page.locator("#live")).to_have_class("live on", timeout=TIMEOUT)

    # Recorded through NATS, it appears without a reload.
    tree = small_plan()
    plan_id = tree[0]["plan_id"]
    await record(nc, db, tree)
    row = page.locator(f'#plans tr[data-plan="{plan_id}"]')
    await expect(row).to_be_visible(timeout=TIMEOUT)
    await expect(row.locator(".count")).to_have_text("6", timeout=TIMEOUT)

    await row.locator("a").first.click()
    _, a, a1, a2, a2a, b = (d["decision_id"] for d in tree)
    await expect(node(page, a)).to_be_visible(timeout=TIMEOUT)
    # Hostile text is shown as text.
    await expect(node(page, a).locator(".chosen")).to_have_text(XSS_OPTION)

    # A decision recorded now appears in the open tree.
    late = decision(str(plan_id), str(b), "tool_invocation", question="Warm?",
                    chosen_option="warm the cache")
    await publish_all(nc.jetstream(), [late])
    await expect(node(page, b).locator(".count")).to_have_text("1 below", timeout=TIMEOUT)

    # Open a decision: the panel shows what `plan explain` shows.
    await node(page, a).click()
    await expect(page.locator("#decision-chosen")).to_have_text(XSS_OPTION, timeout=TIMEOUT)
    await expect(page.locator("#decision-rationale")).to_have_text(XSS_RATIONALE)
    await expect(page.locator("ol.path li")).to_have_count(2)
    assert await page.evaluate("window.__xss") is None

    # Dry run a revert: exactly the affected decisions are highlighted.
    await page.locator("#dry-run").click()
    await expect(page.locator("#report")).to_be_visible(timeout=TIMEOUT)
    await expect(page.locator("#report-affected")).to_have_text("4")
    lit = await page.locator(".node.affected, .node.target").evaluate_all(
        "els => els.map(e => e.dataset.id)")
    assert sorted(lit) == sorted([a, a1, a2, a2a])
    await expect(node(page, a)).to_have_class(re.compile(r"\btarget\b"))
    await page.locator("#report").scroll_into_view_if_needed()

    # Apply: APPLIED, and the tree has the replacement instead.
    page.once("dialog", lambda dialog: dialog.accept())
    await page.locator("#correct-guidance").fill("Use SQLite for now")
    await page.locator("#confirm").click()
    await expect(page.locator("#applied")).to_be_visible(timeout=60_000)
    await expect(page.locator("#lifecycle [data-status=applied]")).to_be_visible()
    await expect(node(page, a)).to_have_count(0, timeout=TIMEOUT)
    await expect(page.locator(".node", has_text="Use SQLite for now")).to_be_visible(
        timeout=TIMEOUT)
    await page.locator("#show-superseded").check()
    await expect(node(page, a)).to_have_class(re.compile(r"\bsuperseded\b"),
                                              timeout=TIMEOUT)
    assert await page.evaluate("window.__xss") is None

    await correction_page_and_tree_then(page, console, str(plan_id), str(a))


async def correction_page_and_tree_then(page: Page, console: Console, plan_id: str,
                                        a: str) -> None:
    # The correction's page: its history, attempts and what it changed.
    listed = await (await page.request.get(
        f"{console.url}/api/corrections?plan={plan_id}")).json()
    [c] = listed["corrections"]
    await page.goto(f"{console.url}/#/correction/{c['correction_id']}")
    await expect(page.locator("#diff")).to_contain_text("superseded (4)", timeout=TIMEOUT)
    await expect(page.locator("#attempts")).to_contain_text("complete")
    await page.locator("#then-links a", has_text="just before").click()
    await expect(page.locator("#cut")).to_contain_text("just before", timeout=TIMEOUT)
    await expect(page.locator(f'#tree-then .node[data-id="{a}"]')).to_contain_text(
        "later superseded by")
    await expect(page.locator("#tree-then .node")).to_have_count(7)  # with the late one


async def test_append_shows_the_child_plan_and_cancel_a_pending_one(
        cli_workers: InProcessWorkers, console: Console, page: Page, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    tree = small_plan()
    plan_id = tree[0]["plan_id"]
    b = tree[5]["decision_id"]
    await record(nc, db, tree)
    await page.goto(f"{console.url}/#/plan/{plan_id}/{b}")
    await expect(page.locator("#decision-chosen")).to_have_text("redis", timeout=TIMEOUT)

    await page.locator("#correct-mode").select_option("append")
    await page.locator("#correct-guidance").fill("Benchmark <memcached> first")
    await expect(page.locator("#confirm")).to_be_disabled()  # the dry run comes first
    await page.locator("#dry-run").click()
    await expect(page.locator("#confirm")).to_be_enabled(timeout=TIMEOUT)
    page.once("dialog", lambda dialog: dialog.accept())
    await page.locator("#confirm").click()
    await expect(page.locator("#applied")).to_be_visible(timeout=60_000)
    # The append records a user_intervention under the target; it names the child plan.
    child = page.locator(".childplan")
    await expect(child).to_be_visible(timeout=TIMEOUT)
    await expect(node(page, b).locator(".count")).to_have_text("1 below")
    await child.click()
    await expect(page.locator("h1")).to_contain_text("Plan", timeout=TIMEOUT)
    await expect(page.locator("q")).to_have_text("Benchmark <memcached> first", timeout=TIMEOUT)

    # Held pending by another lease holder, then cancelled from the tree.
    await db.plan_locks.insert_one({"_id": plan_id, "owner": "test",
                                    "expires_at": datetime.now(UTC) + timedelta(hours=1)})
    a2a = tree[4]["decision_id"]
    await page.goto(f"{console.url}/#/plan/{plan_id}/{a2a}")
    await expect(page.locator("#decision-chosen")).to_have_text("all green", timeout=TIMEOUT)
    page.once("dialog", lambda dialog: dialog.accept())
    await page.locator("#dry-run").click()
    await expect(page.locator("#confirm")).to_be_enabled(timeout=TIMEOUT)
    await page.locator("#confirm").click()
    await expect(page.locator("#correction-actions button", has_text="Cancel")).to_be_visible(
        timeout=TIMEOUT)
    # Cancelling asks first, and for a reason, which stays in the history.
    page.once("dialog", lambda dialog: dialog.accept("not needed after all"))
    await page.locator("#correction-actions button", has_text="Cancel").click()
    await expect(page.locator("#lifecycle [data-status=cancelled]")).to_be_visible(
        timeout=TIMEOUT)
    await page.goto(f"{console.url}/#/corrections")
    await expect(page.locator("#corrections tbody tr")).to_have_count(2, timeout=TIMEOUT)
    cid = await page.locator("#corrections tbody tr").first.get_attribute("data-correction")
    await page.goto(f"{console.url}/#/correction/{cid}")
    await expect(page.locator("#history")).to_contain_text("cancelled", timeout=TIMEOUT)
    await expect(page.locator("#history")).to_contain_text("not needed after all")


async def test_resolve_a_violation_and_dead_letters(
        cli_workers: InProcessWorkers, agents: Agents, console: Console, page: Page, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    tree = small_plan()
    plan_id = tree[0]["plan_id"]
    await record(nc, db, tree)
    inv = (await agents.ok("invariant", "add", "no-prod-writes", "--description",
                           "Never write to production", "--json")).json
    await agents.ok("invariant", "add", "no-rm-rf", "--description", "Never rm -rf",
                    "--check", '!tool.arguments.exists(k, k == "rm")', "--severity", "warning",
                    "--project", "elsewhere")
    await agents.ok("invariant", "add", "no-prod-writes", "--description",
                    "Ask the owner first", "--plan", str(plan_id))
    vid = new_id()
    await nc.jetstream().publish(f"invariants.violations.{plan_id}", json.dumps({
        "violation_id": vid, "invariant_id": inv["id"], "plan_id": plan_id,
        "severity": "error", "details": "<b>wrote</b> to production"}).encode(),
        headers={"Nats-Msg-Id": vid})
    await nc.jetstream().publish(f"decisions.recorded.{plan_id}", b"{not json",
                                 headers={"Nats-Msg-Id": new_id()})
    assert await wait_for_count(db, "invariant_violations", 1, timeout=30) == 1
    assert await wait_for_count(db, "dead_letters", 1, timeout=30) == 1

    await page.goto(f"{console.url}/#/invariants/{plan_id}")
    row = page.locator(f'#violations tr[data-violation="{vid}"]')
    await expect(row).to_contain_text("blocking", timeout=TIMEOUT)
    await expect(row).to_contain_text("<b>wrote</b> to production")
    # One per name: the plan's own beats the global one, which is shown dimmed.
    await expect(page.locator("#effective li")).to_have_count(1)
    await expect(page.locator("#effective li")).to_contain_text("PLAN")
    await expect(page.locator("#invariants tbody tr.dim", has_text="no-prod-writes")
                 ).to_contain_text("GLOBAL")
    await expect(page.locator("#invariants tbody tr", has_text="no-rm-rf")).to_contain_text(
        "warning/record")
    await expect(row).to_contain_text("agent")
    # Resolving asks first (it unblocks the plan): dismissed, nothing happens.
    page.once("dialog", lambda dialog: dialog.dismiss())
    await row.locator("[data-action=resolve]").click()
    await expect(row).to_contain_text("blocking")
    page.once("dialog", lambda dialog: dialog.accept())
    await row.locator("[data-action=resolve]").click()
    await expect(row).to_have_count(0, timeout=TIMEOUT)  # only unresolved are listed
    await page.locator("#inv-unresolved").uncheck()
    # Unsigned (no principals file here): the resolution names no verified operator.
    await expect(row.locator("[data-state]")).to_have_text("resolved", timeout=TIMEOUT)

    await page.goto(f"{console.url}/#/dead-letters")
    await expect(page.locator("#dead-letters tbody tr")).to_have_count(1, timeout=TIMEOUT)
    await page.locator("#dead-letters tbody a").first.click()
    await expect(page.locator("pre")).to_have_text("{not json", timeout=TIMEOUT)


async def test_fail_a_correction_stuck_executing_from_the_tree(
        console: Console, page: Page, nats_server: ManagedServer, mongo_uri: str,
        db_name: str, nc: nats.NATS, db: AsyncDatabase[Document], tmp_path: Path) -> None:
    """Requested from the tree, followed live to EXECUTING (where its worker died, the
    plan's lease outliving it), then failed with a reason from the same panel."""

    async def from_the_tree(plan_id: str, target: str) -> str:
        await page.goto(f"{console.url}/#/plan/{plan_id}/{target}")
        await expect(page.locator("#dry-run")).to_be_visible(timeout=TIMEOUT)
        await page.locator("#dry-run").click()
        await expect(page.locator("#confirm")).to_be_enabled(timeout=TIMEOUT)
        page.once("dialog", lambda dialog: dialog.accept())
        await page.locator("#confirm").click()
        requested = page.locator("#correct-out p", has_text="requested.").locator("a")
        await expect(requested).to_be_visible(timeout=TIMEOUT)
        return str(await requested.text_content())

    async with held_executing(nats_server.url, mongo_uri, db_name, db, nc, tmp_path,
                              from_the_tree) as held:
        await expect(page.locator("#lifecycle [data-status=executing]")).to_be_visible(
            timeout=60_000)
        buttons = page.locator("#correction-actions button")
        await expect(buttons).to_have_text(["Fail"])
        page.once("dialog", lambda dialog: dialog.accept("archive volume <b>lost</b>"))
        await buttons.click()
        await expect(page.locator("#lifecycle [data-status=failed]")).to_be_visible(
            timeout=TIMEOUT)
        await expect(page.locator("#correct-out")).to_contain_text(
            "FAILED: archive volume <b>lost</b>", timeout=TIMEOUT)
        await expect(buttons).to_have_text(["Retry"])

        await page.goto(f"{console.url}/#/correction/{held.correction_id}")
        await expect(page.locator("h1 .badge")).to_have_text("failed", timeout=TIMEOUT)
        await expect(page.locator("#history tr").last).to_contain_text(
            "archive volume <b>lost</b>")
        await expect(page.locator("#attempts")).to_contain_text("failed by an operator")


async def test_the_dry_run_lights_every_affected_decision_drawn(
        cli_workers: InProcessWorkers, console: Console, page: Page,
        db: AsyncDatabase[Document]) -> None:
    """137 affected (the reply lists 100): every one drawn is lit, those of a page loaded
    after the dry run too; the root, not affected, is not."""
    wide = await wide_plan(db, children=130)
    await page.goto(f"{console.url}/#/plan/{wide.plan_id}/{wide.a}")
    await expect(page.locator("#dry-run")).to_be_visible(timeout=TIMEOUT)
    await page.locator("#dry-run").click()
    await expect(page.locator("#report-affected")).to_have_text("137", timeout=TIMEOUT)
    # Drawn: root, A (the target), B, the first 100 C and C1's five K.
    await expect(page.locator(".node.target")).to_have_count(1)
    await expect(node(page, wide.a)).to_have_class(re.compile(r"\btarget\b"))
    await expect(page.locator(".node.affected")).to_have_count(106, timeout=TIMEOUT)
    for d in (wide.b, wide.cs[99], wide.ks[-1]):
        await expect(node(page, d)).to_have_class(re.compile(r"\baffected\b"))
    await expect(node(page, wide.root)).not_to_have_class(re.compile(r"\baffected\b"))
    await page.locator("li.more button").click()
    await expect(node(page, wide.cs[-1])).to_have_class(re.compile(r"\baffected\b"),
                                                        timeout=TIMEOUT)
    await expect(page.locator(".node.affected")).to_have_count(136)


async def test_older_plans_a_page_at_a_time(console: Console, page: Page,
                                            db: AsyncDatabase[Document]) -> None:
    roots = [Decision.model_validate(root()) for _ in range(103)]
    for r in roots:
        await load_plan(db, [r])
    await page.goto(console.url + "/#/plans")
    rows = page.locator("#plans tbody tr")
    await expect(rows).to_have_count(100, timeout=TIMEOUT)
    await expect(rows.first).to_have_attribute("data-plan", roots[-1].plan_id)
    await page.locator("#older-plans").click()
    await expect(rows).to_have_count(103, timeout=TIMEOUT)
    await expect(rows.last).to_have_attribute("data-plan", roots[0].plan_id)
    await expect(page.locator("#older-plans")).to_be_hidden()
