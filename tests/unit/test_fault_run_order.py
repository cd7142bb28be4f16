"""The fault runs' per-plan order check (tests/integration/scale_support.per_plan_order)
calls a pair broken only when the timestamps prove it: the stamps are worker clocks
taken before commits, and a stalled worker once made a known-limit pair look broken."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.integration.scale_support import per_plan_order

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def run(cid: str, arrival: int, stamped: float, start: float, end: float | None,
        plan: str = "P") -> dict[str, Any]:
    history = [{"to_status": "pending", "at": at(stamped)},
               {"to_status": "analyzing", "at": at(start)}]
    if end is not None:
        history.append({"to_status": "applied", "at": at(end)})
    return {"_id": cid, "plan_id": plan, "arrival": arrival, "history": history}


def test_corrections_run_in_arrival_order_are_fine() -> None:
    order = per_plan_order([run("a", 1, 0, 1, 2), run("b", 2, 0.1, 2.1, 3)],
                           {"a": at(0.05), "b": at(0.15)})
    assert (order.overlaps, order.broken, order.late, order.undecided) == ([], [], [], [])


def test_an_earlier_arrival_announced_before_the_later_was_chosen_is_broken() -> None:
    # y waited behind z, recorded and announced long before z ended, yet x ran first.
    docs = [run("z", 1, 0, 0.5, 5), run("y", 2, 1, 8, 9), run("x", 3, 1.5, 5.1, 7)]
    order = per_plan_order(docs, {"z": at(0.1), "y": at(1.1), "x": at(1.6)})
    assert len(order.broken) == 1 and "y (arrival 2" in order.broken[0]
    assert order.late == order.undecided == order.overlaps == []


def test_an_earlier_arrival_stamped_after_the_later_started_is_the_known_limit() -> None:
    order = per_plan_order([run("x", 3, 0, 1, 2), run("y", 2, 1.5, 2.1, 3)],
                           {"x": at(0.1), "y": at(1.6)})
    assert order.broken == [] and len(order.late) == 1
    assert "stamped PENDING 0.50 s after the other started" in order.late[0]


def test_a_stamp_just_before_the_later_started_cannot_be_ordered_by_the_clocks() -> None:
    # The CI case: y stamped 0.51 s before x started, but its commit (bounded only by its
    # announcement) may have come after x's runner read the plan's list.
    order = per_plan_order([run("x", 119, 0, 1.0, 2), run("y", 57, 0.49, 2.1, 3)],
                           {"x": at(0.05), "y": at(0.6)})
    assert order.broken == [] and order.late == [] and len(order.undecided) == 1


def test_a_pair_without_an_announcement_is_never_called_broken() -> None:
    order = per_plan_order([run("x", 3, 1, 2, 3), run("y", 2, 0, 4, 5)], {})
    assert order.broken == [] and len(order.undecided) == 1


def test_overlapping_runs_are_reported() -> None:
    order = per_plan_order([run("a", 1, 0, 1, 3), run("b", 2, 0, 2, 4)], {})
    assert order.overlaps == ["P: a and b"]


def test_plans_are_judged_apart() -> None:
    docs = [run("a", 2, 0, 1, 2, plan="P"), run("b", 1, 0, 3, 4, plan="Q")]
    order = per_plan_order(docs, {"a": at(0.1), "b": at(0.1)})
    assert (order.overlaps, order.broken, order.late, order.undecided) == ([], [], [], [])
