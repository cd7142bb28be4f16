"""`agents search` against the workers as their own process: what the recorder stores is
found by the principal that signed it (never the name a decision gives itself), by its
words and paths, with both names shown; decisions stored before search existed get
their tokens from the backfill."""

from __future__ import annotations

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from store.database import DECISIONS, Document
from store.search_backfill import backfill
from tests.bulk import load_plan
from tests.factories import decision, root
from tests.in_process_workers import InProcessWorkers
from tests.integration.cli_support import Agents, agents, assert_one_line_error
from tests.integration.test_identity_e2e import AGENT, billing_root, signed, signed_workers
from tests.integration.wire import wait_for_count

__all__ = ["agents", "signed_workers"]

pytestmark = pytest.mark.e2e


async def test_signed_decisions_are_found_by_their_signer(
        signed_workers: InProcessWorkers, agents: Agents, nc: nats.NATS,
        db: AsyncDatabase[Document]) -> None:
    top = await billing_root(nc, db)
    claim = decision(top["plan_id"], top["decision_id"], "tool_invocation",
                     question="Which limiter for $where (.*)?", chosen_option="Token bucket",
                     agent={"name": "ops-agent"},
                     artifacts_produced=[{"artifact_path": "src/billing/limits.py",
                                          "artifact_type": "file"}])
    s, data, h = signed(AGENT, claim)
    await nc.jetstream().publish(s, data, headers=h)
    await wait_for_count(db, "decisions", 1, query={"_id": claim["decision_id"]})

    hits = (await agents.ok("search", "token bucket", "--agent", AGENT.name, "--path",
                            "src/billing", "--json")).json["decisions"]
    assert [x["decision_id"] for x in hits] == [claim["decision_id"]]
    assert hits[0]["recorded_by"] == AGENT.name and hits[0]["agent"]["name"] == "ops-agent"
    assert hits[0]["plan_status"] == "active" and hits[0]["current"] is True
    # The name a signed decision gives itself files it under nobody.
    none = await agents.ok("search", "--agent", "ops-agent", "--json")
    assert none.json["decisions"] == []
    text = (await agents.ok("search", "$where", "--type", "tool_invocation")).out
    assert claim["decision_id"] in text and f"{AGENT.name} (says ops-agent)" in text
    assert "no decisions" in (await agents.ok("search", "(.*)")).out
    assert_one_line_error(await agents("search", "--since", "yesterday-ish"), 2, "--since")


async def test_backfill_gives_old_decisions_their_tokens(
        agents: Agents, db: AsyncDatabase[Document]) -> None:
    r = Decision.model_validate(root())
    old = Decision.model_validate(decision(r.plan_id, r.decision_id,
                                           question="Which queue for invoices?",
                                           agent={"name": "queue-agent"}))
    await load_plan(db, [r, old])
    await db[DECISIONS].update_many({}, {"$unset": {"search_tokens": ""}})
    assert (await agents.ok("search", "invoices", "--json")).json["decisions"] == []
    assert await backfill(db, batch=1) == 2
    hits = (await agents.ok("search", "invoices", "--agent", "queue-agent", "--json")).json
    assert [x["decision_id"] for x in hits["decisions"]] == [old.decision_id]
    assert await backfill(db) == 0
