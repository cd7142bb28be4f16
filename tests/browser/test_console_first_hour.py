"""The console as a new operator meets it, in headless Chromium at 1440×900 and at
800×900, against the real stack: counts equal to the CLI's after a revert rolled a child
plan back, the dry-run report in view without scrolling, the Apply confirmation
repeating risk and counts, option text never squeezed below a readable width, whole IDs
and suffixes in Find, a plan list that filters, comments, ending a plan, dead letters
discarded rather than retried in vain."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator

import nats
import pytest
from playwright.async_api import Browser, Page, expect
from pymongo.asynchronous.database import AsyncDatabase

from contracts.shared.ids import new_id
from store.database import Document
from tests.browser.conftest import browser
from tests.conftest import ROOT
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import Agents, agents, cli_workers
from tests.integration.console_support import Console, console
from tests.integration.wire import wait_for_count

__all__ = ["agents", "browser", "cli_workers", "console"]

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

TIMEOUT = 20_000
READABLE_PX = 120
"""An option's text is never drawn narrower than this (about 15 characters)."""
SIZES = [pytest.param((1440, 900), id="1440x900"), pytest.param((800, 900), id="800x900")]


@pytest.fixture(params=SIZES)
async def sized(request: pytest.FixtureRequest, browser: Browser) -> AsyncIterator[Page]:
    width, height = request.param
    context = await browser.new_context(viewport={"width": width, "height": height})
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        yield page
    finally:
        await context.close()
    assert not [e for e in errors if "Failed to load resource" not in e], errors


async def example_plan(agents: Agents) -> dict[str, str]:
    """The README's agent: a plan with a strategy and a docs child plan."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "examples" / "agent_records_plan.py"), cwd=ROOT,
        env=agents.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out = (await asyncio.wait_for(proc.communicate(), 60))[0].decode()
    plan = re.search(r"^plan_id (\w{26})  \(child plan (\w{26})\)", out, re.M)
    kinds = dict(re.findall(r"^  (\w+) +(\w{26})  seq", out, re.M))
    assert plan, out
    return {"plan": plan[1], "child": plan[2], **kinds}


async def in_view(page: Page, selector: str) -> bool:
    """Whether the element is wholly inside the window, without scrolling the page."""
    return bool(await page.locator(selector).evaluate(
        "e => { const r = e.getBoundingClientRect(); return r.top >= 0 && "
        "r.top < window.innerHeight && r.left >= 0 && r.right <= window.innerWidth; }"))


async def test_a_revert_from_the_tree_reads_true_at_both_widths(
        cli_workers: InProcessWorkers, agents: Agents, console: Console, sized: Page,
        db: AsyncDatabase[Document]) -> None:
    page = sized
    ids = await example_plan(agents)
    plan, child, strategy = ids["plan"], ids["child"], ids["strategy_choice"]

    # Find takes an ID's last characters, as the tree prints them.
    await page.goto(console.url + "/#/plans")
    await page.locator("#find input").fill("…" + strategy[-8:])
    await page.locator("#find button").click()
    await expect(page.locator("#decision-chosen")).to_have_text(
        "Redis INCR with a TTL per window", timeout=TIMEOUT)

    # The dry run's report is in view as soon as it is drawn; its estimate is readable.
    await page.locator("#dry-run").click()
    await expect(page.locator("#report")).to_be_visible(timeout=TIMEOUT)
    await expect(page.locator("#report-affected")).to_have_text("8")
    await page.wait_for_timeout(300)  # the smooth part of scrollIntoView, if any
    assert await in_view(page, "#report-risk")
    assert re.search(r"\b1 min 0 s to recompute", await page.locator("#report").inner_text())
    assert not re.search(r"\d\.\d{4,}", await page.locator("#report").inner_text())

    # Every option drawn (the dry run opened the affected part of the tree) keeps a
    # readable width: it wraps, and the badges move under it.
    await expect(page.locator('.node[data-id="' + ids["error_recovery"] + '"]')
                 ).to_be_visible(timeout=TIMEOUT)
    widths = await page.locator(".node .chosen").evaluate_all(
        "els => els.map(e => [e.getBoundingClientRect().width, e.scrollWidth <= "
        "e.clientWidth + 1])")
    assert len(widths) >= 7 and all(w >= READABLE_PX and whole for w, whole in widths), widths

    # The confirmation repeats what the dry run said.
    said: list[str] = []

    async def confirm(dialog: object) -> None:
        said.append(dialog.message)  # type: ignore[attr-defined]
        await dialog.accept()  # type: ignore[attr-defined]

    page.once("dialog", confirm)
    await page.locator("#correct-guidance").fill("Use an in-process token bucket")
    await page.locator("#confirm").click()
    await expect(page.locator("#applied")).to_be_visible(timeout=60_000)
    assert "Risk: medium" in said[0] and "Affected decisions: 8" in said[0], said
    assert "Child plans: 1" in said[0] and "Files: 4" in said[0], said

    # Counts equal the CLI's: the parent keeps its root and the replacement current;
    # the child plan's superseded decisions are the child's.
    cli = {p["plan_id"]: p for p in (await agents.ok("plan", "list", "--json")).json[
        "plans"]}
    await page.goto(console.url + "/#/plans")
    row = page.locator(f'#plans tr[data-plan="{plan}"] .count')
    await expect(row).to_have_attribute("data-current", str(cli[plan]["current"]),
                                        timeout=TIMEOUT)
    assert cli[plan]["current"] == 2
    await expect(page.locator(f'#plans tr[data-plan="{child}"] .count')).to_have_attribute(
        "data-current", "0")
    # IDs in the list are whole.
    await expect(page.locator(f'#plans tr[data-plan="{plan}"] td.id a').first).to_have_text(
        plan)
    await page.goto(f"{console.url}/#/plan/{plan}")
    await expect(page.locator("#plan-summary")).to_contain_text(
        "2 current decision(s), 6 superseded", timeout=TIMEOUT)


async def test_plans_filter_comments_ending_and_dead_letters(
        cli_workers: InProcessWorkers, agents: Agents, console: Console, sized: Page, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    page = sized
    ids = await example_plan(agents)
    plan, child = ids["plan"], ids["child"]

    await page.goto(console.url + "/#/plans")
    await expect(page.locator(f'#plans tr[data-plan="{plan}"]')).to_be_visible(
        timeout=TIMEOUT)
    await page.locator("#plans-text").fill("document the API")
    await page.locator("#plans-filter button").click()
    await expect(page.locator("#plans tbody tr")).to_have_count(1, timeout=TIMEOUT)
    await expect(page.locator(f'#plans tr[data-plan="{child}"]')).to_be_visible()

    # A comment on a decision, recorded by the workers with its author.
    await page.goto(f"{console.url}/#/plan/{plan}/{ids['strategy_choice']}")
    await page.locator("#comment-text").fill("Ask billing about the cache first")
    await page.locator("#add-comment").click()
    await expect(page.locator("#comments li")).to_contain_text(
        "unverified: Ask billing about the cache first", timeout=TIMEOUT)

    # Ending the plan asks why; the record keeps who and why.
    page.once("dialog", lambda dialog: dialog.accept("done for now"))
    await page.locator("#complete-plan").click()
    assert await wait_for_count(db, "plans", 1, timeout=30,
                                query={"_id": plan, "status": "completed"}) == 1
    await page.reload()
    await expect(page.locator("h1 .badge")).to_have_text("completed", timeout=TIMEOUT)
    await expect(page.locator("#plan-actions")).to_contain_text("by unverified")
    await expect(page.locator("#complete-plan")).to_have_count(0)

    # A dead letter no retry can fix offers no Retry; it is discarded with a reason.
    await nc.jetstream().publish(f"decisions.recorded.{plan}", b"not json",
                                 headers={"Nats-Msg-Id": new_id()})
    assert await wait_for_count(db, "dead_letters", 1, timeout=30) == 1
    await page.goto(console.url + "/#/dead-letters")
    row = page.locator("#dead-letters tbody tr[data-letter]")
    await expect(row).to_have_count(1, timeout=TIMEOUT)
    await expect(row.locator("[data-action=retry]")).to_have_count(0)
    await expect(row.locator(".not-retryable")).to_have_attribute(
        "title", re.compile("rule not_json would refuse them again"))
    page.once("dialog", lambda dialog: dialog.accept("a test publisher"))
    await row.locator("[data-action=discard]").click()
    await expect(page.locator("#dead-letters tbody tr[data-letter]")).to_have_count(
        0, timeout=TIMEOUT)
    await page.locator("#dl-discarded").check()
    await expect(page.locator("#dead-letters tbody tr[data-letter]")).to_contain_text(
        "discarded by unverified: a test publisher", timeout=TIMEOUT)
