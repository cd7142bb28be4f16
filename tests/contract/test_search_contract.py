"""Search (services/search.py) on the memory store and on MongoDB: each filter, pages
newest first, the scan bound, and hostile query strings that find nothing and never
reach the database as anything but strings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from contracts.decisions.currency import Currency
from contracts.decisions.model import Decision
from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.search import SearchFilter
from contracts.decisions.types import DecisionType
from contracts.shared.ids import new_id
from services.search import Hit, search
from tests.contract.conftest import Backend, d
from tests.contract.test_lookup_contract import spawn_and_revert

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
FILE = "file"


async def scene(b: Backend) -> list[Decision]:
    """A billing plan: root, a tool call by billing-agent touching src/billing/, an
    older strategy choice by ops-agent; newest decision last."""
    plan = new_id()
    r = d(plan, None).model_copy(update={"question": "Ship the invoices",
                                         "chosen_option": "Nightly batch"})
    tool = d(plan, r.decision_id, "tool_invocation", question="Which Rate limiter?",
             chosen_option="Token bucket", rationale="Bursty traffic from the $where API",
             agent={"name": "billing-agent"},
             artifacts_produced=[{"artifact_path": "src/billing/tax.py", "artifact_type": FILE}])
    old = d(plan, r.decision_id, question="Which queue?", chosen_option="Token ring",
            agent={"name": "ops-agent"}, created_at=NOW - timedelta(days=3),
            artifacts_produced=[{"artifact_path": "docs/queue.md", "artifact_type": FILE}])
    return await b.load([r, tool, old])


def ids(page_hits: list[Hit]) -> list[str]:
    return [h.found.decision.decision_id for h in page_hits]


async def found(b: Backend, **where: Any) -> list[str]:
    return ids((await search(b.reads, SearchFilter(**where))).hits)


async def test_each_filter(b: Backend) -> None:
    r, tool, old = await scene(b)
    assert await found(b, text="TOKEN") == [old.decision_id, tool.decision_id]
    assert await found(b, text="token bucket") == [tool.decision_id]
    assert await found(b, text="bursty") == [tool.decision_id]   # the rationale
    assert await found(b, text="token buck") == []                # whole words
    assert await found(b, decision_type=DecisionType.TOOL_INVOCATION) == [tool.decision_id]
    assert await found(b, agent="ops-agent") == [old.decision_id]
    assert await found(b, agent="ops-agent", text="bucket") == []
    assert await found(b, path="src/billing") == [tool.decision_id]
    assert await found(b, path="src/billing/tax.py") == [tool.decision_id]
    assert await found(b, path="docs/") == [old.decision_id]
    assert await found(b, text="which", until=NOW - timedelta(days=1)) == [old.decision_id]
    assert await found(b, text="which", since=NOW - timedelta(days=1)) == [tool.decision_id]
    assert r.decision_id in await found(b, text="invoices", currency=Currency.CURRENT)
    assert await found(b, text="invoices", currency=Currency.SUPERSEDED) == []


async def test_plan_status_and_superseded(b: Backend) -> None:
    tree, kids, _ = await spawn_and_revert(b)
    superseded = await search(b.reads, SearchFilter(currency=Currency.SUPERSEDED))
    assert {tree[1].decision_id, *(k.decision_id for k in kids)} <= set(ids(superseded.hits))
    rolled = await search(b.reads, SearchFilter(), status=PlanStatus.ROLLED_BACK)
    assert set(ids(rolled.hits)) == {k.decision_id for k in kids}
    assert {h.plan_status for h in rolled.hits} == {PlanStatus.ROLLED_BACK}
    active = await search(b.reads, SearchFilter(), status=PlanStatus.ACTIVE)
    assert tree[0].decision_id in ids(active.hits)
    assert not set(ids(active.hits)) & {k.decision_id for k in kids}


async def test_pages_newest_first(b: Backend) -> None:
    plan = new_id()
    r = d(plan, None)
    made = [r] + [d(plan, r.decision_id, question=f"Paged question {i}") for i in range(5)]
    await b.load(made)
    want = [x.decision_id for x in reversed(made[1:])]
    got, before = [], None
    for _ in range(3):
        page = await search(b.reads, SearchFilter(text="paged question"), limit=2,
                            before=before)
        got += ids(page.hits)
        before = page.next_before
        if before is None:
            break
    assert got == want and before is None
    exact = await search(b.reads, SearchFilter(text="paged"), limit=5)
    assert ids(exact.hits) == want
    # A full page cannot know whether more follow: the next one says so.
    last = await search(b.reads, SearchFilter(text="paged"), before=exact.next_before)
    assert last.hits == [] and last.next_before is None


async def test_a_page_reads_at_most_scan_max(b: Backend) -> None:
    plan = new_id()
    r = d(plan, None)
    await b.load([r] + [d(plan, r.decision_id, question="Bounded scan") for _ in range(6)])
    page = await search(b.reads, SearchFilter(text="bounded", currency=Currency.SUPERSEDED),
                        scan_max=4)
    assert page.hits == [] and page.scanned == 4 and page.next_before is not None
    rest = await search(b.reads, SearchFilter(text="bounded", currency=Currency.SUPERSEDED),
                        scan_max=4, before=page.next_before)
    assert rest.hits == [] and rest.next_before is None and rest.scanned == 2


HOSTILE = ["$where", "{'$gt': ''}", ".*", "^(a+)+$", "\\", "\x00", "\udcff\ud800",
           "this.question == 'x' || true", "a" * 1_000_000, "$" * 10_000, "💥 ☃ ..."]


@pytest.mark.parametrize("field", ["text", "agent", "path"])
async def test_hostile_strings_are_only_strings(b: Backend, field: str) -> None:
    _, tool, _ = await scene(b)
    for value in HOSTILE:
        got = await found(b, **{field: value})
        # A hostile text's words are words ("$where" finds the rationale's "where");
        # as an agent or a path it is a name nobody has.
        assert got == ([tool.decision_id] if field == "text" and value == "$where" else [])

