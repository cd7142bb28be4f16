"""The console's Search page in a real headless Chromium against a real MongoDB-wire
server and NATS: the header's search box, the filters, older results a page at a time,
and hostile text shown as text."""

from __future__ import annotations

import pytest
from playwright.async_api import Page, expect
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from contracts.shared.ids import new_id
from store.database import Document
from tests.browser.conftest import browser, page
from tests.bulk import load_plan
from tests.factories import decision, root
from tests.integration.console_support import Console, console

__all__ = ["browser", "console", "page"]

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

TIMEOUT = 20_000
XSS = '<img src=x onerror="window.__xss=1">Token bucket'


async def billing_plan(db: AsyncDatabase[Document]) -> list[Decision]:
    plan = new_id()
    r = Decision.model_validate(root(plan))
    p, rid = plan, r.decision_id
    made = [r, Decision.model_validate(decision(
        p, rid, "tool_invocation", question="Which rate limiter?", chosen_option=XSS,
        agent={"name": "billing-agent"},
        artifacts_produced=[{"artifact_path": "src/billing/tax.py", "artifact_type": "file"}]))]
    made += [Decision.model_validate(decision(p, rid, question=f"Paged limiter {i}?",
                                              chosen_option="Token ring"))
             for i in range(55)]
    return await load_plan(db, made)


async def test_search_box_filters_and_pages(console: Console, page: Page,
                                            db: AsyncDatabase[Document]) -> None:
    made = await billing_plan(db)
    tool = made[1]
    await page.goto(console.url + "/#/plans")
    await page.locator("#search input").fill("rate LIMITER")
    await page.locator("#search button").click()
    rows = page.locator("#search-results tbody tr")
    await expect(rows).to_have_count(1, timeout=TIMEOUT)
    row = page.locator(f'#search-results tr[data-decision="{tool.decision_id}"]')
    await expect(row).to_contain_text(XSS)
    await expect(row).to_contain_text("billing-agent")
    await expect(row).to_contain_text("unsigned")
    assert await page.evaluate("window.__xss") is None

    # A folder and a type; then a filter nothing matches.
    await page.locator("#search-text").fill("")
    await page.locator("#search-path").fill("src/billing")
    await page.locator("#search-type").select_option("tool_invocation")
    await page.locator("#search-filter button").click()
    await expect(rows).to_have_count(1, timeout=TIMEOUT)
    await expect(row).to_be_visible()
    await page.locator("#search-type").select_option("error_recovery")
    await page.locator("#search-filter button").click()
    await expect(rows).to_have_text("No decisions match.", timeout=TIMEOUT)

    # Newest first, 50 a page; the older ones on the button.
    await page.locator("#search-path").fill("")
    await page.locator("#search-type").select_option("")
    await page.locator("#search-text").fill("limiter")
    await page.locator("#search-state").select_option("current")
    await page.locator("#search-filter button").click()
    await expect(rows).to_have_count(50, timeout=TIMEOUT)
    await expect(rows.first).to_have_attribute("data-decision", made[-1].decision_id)
    await page.locator("#older-decisions").click()
    await expect(rows).to_have_count(56, timeout=TIMEOUT)
    await expect(rows.last).to_have_attribute("data-decision", tool.decision_id)

    # A click opens the decision in its plan.
    await row.locator("a").first.click()
    await expect(page.locator("#decision-chosen")).to_have_text(XSS, timeout=TIMEOUT)


async def test_a_bad_filter_says_why(console: Console, page: Page) -> None:
    await page.goto(console.url + "/#/search")
    await page.locator("#search-since").fill("yesterday-ish")
    await page.locator("#search-filter button").click()
    await expect(page.locator("#search-note")).to_contain_text("not an ISO time",
                                                               timeout=TIMEOUT)
