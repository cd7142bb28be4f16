"""The claim rules as the recorder's transaction asks them of a child plan's record
(store.batch_insert._claim_open): the same answers MongoDB gave the filter they replace,
including its millisecond precision and its nulls."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from contracts.decisions.model import Decision
from contracts.trust.ownership import Ownership
from store.batch_insert import _claim_open
from tests.factories import decision, root

T0 = datetime(2026, 12, 3, 12, 0, 0, 123456, tzinfo=UTC)
PARENT = root(created_at=T0.isoformat())


def claim(at: datetime = T0) -> Decision:
    return Decision.model_validate(decision(PARENT["plan_id"], PARENT["decision_id"],
                                            created_at=at.isoformat()))


OWNED = Ownership("team-a", ("helper",))


def test_a_plan_nobody_claimed_or_began_is_open() -> None:
    assert _claim_open({"_id": "p"}, claim(), OWNED)
    assert _claim_open({"_id": "p", "parent_plan_id": None, "root_created_at": None,
                        "named_parent_plan_id": None}, claim(), OWNED)


def test_another_parent_or_another_claim_of_this_parent_closes_it() -> None:
    d = claim()
    assert not _claim_open({"parent_plan_id": "other"}, d, OWNED)
    assert not _claim_open({"parent_plan_id": d.plan_id,
                            "spawned_from_decision_id": "another"}, d, OWNED)
    assert _claim_open({"parent_plan_id": d.plan_id,
                        "spawned_from_decision_id": d.decision_id}, d, OWNED)
    assert not _claim_open({"named_parent_plan_id": "other"}, d, OWNED)
    assert _claim_open({"named_parent_plan_id": d.plan_id}, d, OWNED)


def test_a_root_must_begin_no_earlier_than_the_claim_to_the_millisecond() -> None:
    d = claim()
    stored = T0.replace(microsecond=123000)  # what MongoDB keeps of T0
    began: dict[str, Any] = {"owner": "helper"}
    assert _claim_open(began | {"root_created_at": stored}, d, OWNED)
    assert _claim_open(began | {"root_created_at": stored.replace(tzinfo=None)}, d, OWNED)
    assert not _claim_open(began | {"root_created_at": stored - timedelta(milliseconds=1)},
                           d, OWNED)
    assert not _claim_open(began | {"root_created_at": "2026"}, d, OWNED)


def test_a_root_signed_outside_the_claiming_plan_s_principals_closes_it() -> None:
    later = {"root_created_at": T0 + timedelta(seconds=1)}
    assert not _claim_open(later | {"owner": "stranger"}, claim(), OWNED)
    assert not _claim_open(later | {"owner": None}, claim(), OWNED)
    assert _claim_open(later | {"owner": "team-a"}, claim(), OWNED)
    assert _claim_open(later | {"owner": "stranger"}, claim(), Ownership())
