"""The console's Bulk page in a real headless Chromium against real servers and
workers: a filter, its dry run (matches, plans, risk, files, conflicts), a refusal, the
batch requested and followed until every correction applied; then a second batch
cancelled from the page."""

from __future__ import annotations

import nats
import pytest
from playwright.async_api import Page, expect
from pymongo.asynchronous.database import AsyncDatabase

from store.database import Document
from tests.browser.conftest import browser, page
from tests.conftest import Workers
from tests.integration.bulk_support import load_plans
from tests.integration.cli_support import cli_workers
from tests.integration.console_support import Console, console
from workers.streams import ensure_streams

__all__ = ["browser", "cli_workers", "console", "page"]

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

TIMEOUT = 20_000


async def test_filter_preview_request_and_progress_to_completion(
        cli_workers: Workers, console: Console, page: Page,
        db: AsyncDatabase[Document]) -> None:
    loaded = await load_plans(db, 40)
    await page.goto(console.url + "/#/bulk")
    await expect(page.locator("#bulk-batches tbody")).to_contain_text("No batches yet.",
                                                                      timeout=TIMEOUT)
    # A filter nothing matches is refused with the reason.
    await page.locator("#bulk-text").fill("nothing-has-this-word")
    await page.locator("#bulk-filter button").click()
    await expect(page.locator("#bulk-error")).to_contain_text("matches no decision",
                                                              timeout=TIMEOUT)

    await page.locator("#bulk-text").fill("leftpad yanked")
    await page.locator("#bulk-filter button").click()
    preview = page.locator("#bulk-preview")
    await expect(preview).to_contain_text("80 decision(s) in 40 plan(s)", timeout=TIMEOUT)
    await expect(page.locator("#bulk-conflicts")).to_contain_text("40 match(es)")
    await expect(page.locator("#bulk-risk")).to_contain_text("low")
    await expect(page.locator(f'#bulk-items tr[data-decision="{loaded.inner[-1]}"]')
                 ).to_have_attribute("data-state", "covered")
    await expect(page.locator("#bulk-request")).to_have_text("Request 40 correction(s)")
    assert await db.bulk_batches.count_documents({}) == 0

    # The reason is required: the server says so, nothing is recorded.
    await page.locator("#bulk-request").click()
    await expect(page.locator("#toast")).to_contain_text("reason must be non-blank",
                                                         timeout=TIMEOUT)
    await page.locator("#bulk-reason").fill("the yanked release")
    await page.locator("#bulk-request").click()
    await expect(page.locator("#bulk-batch-state")).to_have_text("completed", timeout=90_000)
    await expect(page.locator("#bulk-counts")).to_have_text("covered 40, applied 40")
    await expect(page.locator("#bulk-cancel")).to_be_hidden()
    assert await db.corrections.count_documents({"status": "applied"}) == 40
    batch_id = await page.locator("#bulk-batch-id").inner_text()
    await expect(page.locator(f'#bulk-batches tr[data-batch="{batch_id}"]')
                 ).to_contain_text("completed")


async def test_a_batch_is_cancelled_from_the_page(console: Console, page: Page, nc: nats.NATS,
                                                  db: AsyncDatabase[Document]) -> None:
    """No workers run: the batch's corrections wait in the stream, and the cancel asks
    each of them to cancel; the batch ends cancelled at once."""
    await ensure_streams(nc.jetstream())
    await load_plans(db, 30)
    await page.goto(console.url + "/#/bulk")
    await page.locator("#bulk-text").fill("leftpad")
    await page.locator("#bulk-type").select_option("tool_invocation")
    await page.locator("#bulk-mode").select_option("append")
    await page.locator("#bulk-guidance").fill("Use the maintained fork.")
    await page.locator("#bulk-filter button").click()
    await expect(page.locator("#bulk-request")).to_have_text("Request 30 correction(s)",
                                                             timeout=TIMEOUT)
    await page.locator("#bulk-reason").fill("stop this one")
    await page.locator("#bulk-request").click()
    await expect(page.locator("#bulk-batch-state")).to_have_text("running", timeout=TIMEOUT)
    await expect(page.locator("#bulk-counts")).to_have_text("requested 30")
    await page.locator("#bulk-cancel").click()
    await expect(page.locator("#bulk-batch-state")).to_have_text("cancelled", timeout=TIMEOUT)
    await expect(page.locator("#bulk-cancel")).to_be_hidden()
    assert await db.corrections.count_documents({}) == 0
