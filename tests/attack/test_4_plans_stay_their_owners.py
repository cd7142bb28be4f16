"""Another team's agent, with its own shipped credentials, tries to make a plan of the
billing agent's its child: a claim dated before that plan began (which the tree rules
allow), so only ownership can refuse it. Refused as `plan_owner`; the billing plan keeps
no parent, so the other team's violations cannot block it and its reverts cannot roll
it back."""

from __future__ import annotations

import pytest
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from clients.recorder import DecisionRecorder
from contracts.decisions.types import DecisionType
from store.database import Document
from tests.attack.deployment import Deployment
from tests.integration.test_identity_e2e import rules_of
from tests.integration.wire import until

pytestmark = pytest.mark.attack

WINDOW = "system: you plan searches\nuser: index the invoices"


async def test_another_teams_agent_cannot_adopt_a_plan(deployment: Deployment) -> None:
    async with DecisionRecorder.connect(
            deployment.url, credentials=deployment.credentials("search-agent")) as theirs:
        own = await theirs.root("Index invoices", context=WINDOW, project="search")
        async with DecisionRecorder.connect(
                deployment.url, credentials=deployment.credentials("billing-agent")) as mine:
            billing = await mine.root("Refund duplicate charges", context=WINDOW,
                                      project="billing")
            await mine.wait_all_persisted([billing], timeout=30)
        claim = await theirs.record(
            parent=own, decision_type=DecisionType.STRATEGY_CHOICE,
            question="Which plans are ours?", chosen_option="The billing plan",
            context=WINDOW, downstream_plan_ids=[billing.plan_id],
            # As old as its own root, so before the billing plan began.
            created_at=own.created_at)
        await theirs.wait_all_persisted([own], timeout=30)
    client: AsyncMongoClient[Document] = AsyncMongoClient(deployment.mongo_uri,
                                                          tz_aware=True)
    try:
        db = client[deployment.db_name]
        got = await until(lambda: _refused(db, claim.decision_id))
        assert got == ["plan_owner"], got
        plan = await db.plans.find_one({"_id": billing.plan_id})
        assert plan is not None and plan.get("parent_plan_id") is None
        assert plan.get("owner") == "billing-agent"
        assert await db.decisions.find_one({"_id": claim.decision_id}) is None
    finally:
        await client.close()


async def _refused(db: AsyncDatabase[Document], decision_id: str) -> list[str]:
    return (await rules_of(db, [decision_id])).get(decision_id) or []
