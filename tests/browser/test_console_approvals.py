"""Approving from the console in headless Chromium: the queue page lists a decision held
for a person, its tree marks it, the operator approves it from the decision's panel
(signed as the console's operator principal), and the agent waiting at its gate proceeds;
a verdict given elsewhere (the CLI's subject) updates the open queue and tree live."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import nats
import pytest
from playwright.async_api import Page, expect
from pymongo.asynchronous.database import AsyncDatabase

from clients.approvals import GateStatus
from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from console.config import ConsoleConfig
from console.deps import Deps
from contracts.invariants.approval_wire import Verdict
from store.database import Document
from store.mongo_store import MongoStore
from tests.browser.conftest import browser, page
from tests.console_deps import deps_over
from tests.integration.console_support import serve_console
from tests.integration.test_approvals_e2e import ALICE, held, rec, signed_workers, verdict, write

__all__ = ["browser", "page", "rec", "signed_workers"]

pytestmark = [pytest.mark.browser, pytest.mark.e2e]

TIMEOUT = 20_000


async def test_approve_from_the_tree_and_the_agent_proceeds(
        rec: DecisionRecorder, page: Page, db: AsyncDatabase[Document],
        nc: nats.NATS) -> None:
    @asynccontextmanager
    async def as_alice(config: ConsoleConfig) -> AsyncIterator[Deps]:
        deps = deps_over(MongoStore(db), nc)
        deps.ops = CorrectionClient(nc, requested_by=ALICE.name, signer=ALICE.signer)
        yield deps

    root = await rec.root("Ship the billing config", context="deploy", project="billing")
    d = await held(rec, root)
    gate = asyncio.create_task(rec.gate(d, timeout=90))

    async with serve_console(db, nc, connect=as_alice) as console:
        await page.goto(console.url + "/#/approvals")
        row = page.locator(f'#approvals tr[data-decision="{d.decision_id}"]')
        await expect(row).to_be_visible(timeout=TIMEOUT)
        await expect(row).to_contain_text("deploy/prod/app.yaml")
        await row.locator("a").first.click()

        node = page.locator(f'.node[data-id="{d.decision_id}"]')
        await expect(node).to_have_class(re.compile(r"\bawaiting-approval\b"), timeout=TIMEOUT)
        await expect(page.locator("#approval-status")).to_have_text("requested",
                                                                    timeout=TIMEOUT)
        await page.locator("#approval-reason").fill("checked the diff")
        page.once("dialog", lambda dialog: dialog.accept())
        await page.locator("#approve-decision").click()
        await expect(page.locator("#approval-status")).to_have_text("granted",
                                                                    timeout=TIMEOUT)
        await expect(node).not_to_have_class(re.compile(r"\bawaiting-approval\b"))

        opened = await gate
        assert opened.status is GateStatus.APPROVED and opened.decided_by == "alice"
        # The agent proceeds: what it does next is recorded and shows on the tree.
        after = await write(rec, d, "deploy/staging/notes.md")
        assert (await rec.wait_persisted(after, timeout=20)).hold is None
        await expect(page.locator(f'.node[data-id="{d.decision_id}"] .count')).to_have_text(
            "1 below", timeout=TIMEOUT)
    stored = await db["approvals"].find_one({"_id": d.decision_id})
    assert stored["decided_by"] == "alice" and stored["verified"]
    assert stored["reason"] == "checked the diff"


async def test_a_verdict_given_elsewhere_shows_live(
        rec: DecisionRecorder, page: Page, db: AsyncDatabase[Document],
        nc: nats.NATS) -> None:
    root = await rec.root("Ship the billing config", context="deploy", project="billing")
    d = await held(rec, root)
    async with serve_console(db, nc) as console:
        await page.goto(console.url + "/#/approvals")
        row = page.locator(f'#approvals tr[data-decision="{d.decision_id}"]')
        await expect(row).to_be_visible(timeout=TIMEOUT)
        await verdict(nc, ALICE, d, Verdict.DENY, reason="not this week")
        await expect(row).to_have_count(0, timeout=TIMEOUT)  # no reload: the live event

        await page.goto(console.url + f"/#/plan/{d.plan_id}")
        node = page.locator(f'.node[data-id="{d.decision_id}"]')
        await expect(node).to_be_visible(timeout=TIMEOUT)
        await expect(node).not_to_have_class(re.compile(r"\bawaiting-approval\b"))
