"""The recorder's index of deliveries waiting for a parent (workers.parent_wakes)."""

from __future__ import annotations

import pytest

from workers.parent_wakes import ParentWakes

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_stored_parent_wakes_its_waiting_children_once() -> None:
    clock = Clock()
    wakes = ParentWakes(clock=clock)
    wakes.sleep("P", "C1", "ack.1", 2.0)
    wakes.sleep("P", "C2", "ack.2", 0.5)
    wakes.sleep("Q", "C3", "ack.3", 2.0)
    assert len(wakes) == 3
    assert wakes.wake(["P", "X"]) == ["ack.1", "ack.2"]
    assert wakes.wake(["P"]) == [] and len(wakes) == 1


def test_a_chain_is_woken_whole_parents_first() -> None:
    """So it comes back together and one batch records it."""
    clock = Clock()
    wakes = ParentWakes(clock=clock)
    wakes.sleep("C2", "C3", "ack.3", 2.0)  # deepest first, as they arrived
    wakes.sleep("C1", "C2", "ack.2", 0.25)
    wakes.sleep("P", "C1", "ack.1", 2.0)
    wakes.sleep("C1", "D", "ack.d", 2.0)
    clock.now += 1.0  # C2 is being redelivered already: not woken, its children are
    assert wakes.wake(["P"]) == ["ack.1", "ack.d", "ack.3"]
    assert len(wakes) == 0


def test_a_delivery_past_its_delay_is_not_woken() -> None:
    """JetStream is redelivering it already: a second nak would deliver it twice."""
    clock = Clock()
    wakes = ParentWakes(clock=clock)
    wakes.sleep("P", "C1", "ack.soon", 0.25)
    wakes.sleep("P", "C2", "ack.later", 5.0)
    clock.now += 1.0
    assert wakes.wake(["P"]) == ["ack.later"] and len(wakes) == 0


def test_the_index_is_bounded_and_drops_what_is_past_first() -> None:
    clock = Clock()
    wakes = ParentWakes(limit=2, clock=clock)
    wakes.sleep("P", "C1", "ack.1", 0.25)
    wakes.sleep("P", "C2", "ack.2", 5.0)
    wakes.sleep("P", "C3", "ack.3", 5.0)  # full: not remembered, waits its backoff
    assert len(wakes) == 2
    clock.now += 1.0
    wakes.sleep("Q", "C4", "ack.4", 5.0)  # ack.1 is past its delay: dropped for room
    assert len(wakes) == 2
    assert wakes.wake(["P", "Q"]) == ["ack.2", "ack.4"]
    wakes.sleep("R", "C5", "ack.5", 1.0)
    wakes.clear()
    assert len(wakes) == 0 and wakes.wake(["R"]) == []
