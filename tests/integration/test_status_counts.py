"""The ledger's counts (`agents status`, the gauges): right per value, and cheap on a
quiet ledger, where one indexed look per kind stands in for a count per value."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from contracts.shared.rules import Rule
from store.database import DEAD_LETTERS, INVARIANT_VIOLATIONS, Document
from store.status import ledger_status
from tests.integration.bounds_support import Commands

pytestmark = pytest.mark.store

NOW = datetime(2026, 12, 3, tzinfo=UTC)


async def test_a_quiet_ledger_is_counted_in_a_few_reads(
        counted: tuple[AsyncDatabase[Document], Commands]) -> None:
    db, commands = counted
    commands.reset()
    status = await ledger_status(db, NOW)
    assert (status.dead_letters, status.dead_letters_by_rule) == (0, {})
    assert status.corrections_in_flight == {} and status.violations_open == {}
    # One look each for dead letters, corrections in flight and open violations, then
    # the failed corrections (their times and their count) and the workers: not one
    # count per rule (there are more than 40).
    assert len(Rule) > 40
    assert commands.reads <= 8, commands.sent


async def test_each_value_is_counted_once_something_is_there(
        counted: tuple[AsyncDatabase[Document], Commands]) -> None:
    db, _ = counted
    first, second = list(Rule)[:2]
    await db[DEAD_LETTERS].insert_many([
        {"_id": "a", "errors": [{"rule": first.value}], "discarded_at": None},
        {"_id": "b", "errors": [{"rule": first.value}]},
        {"_id": "c", "errors": [{"rule": second.value}]},
        {"_id": "d", "errors": [{"rule": second.value}], "discarded_at": NOW}])
    await db[INVARIANT_VIOLATIONS].insert_one(
        {"_id": "v", "severity": "error", "resolved_at": None})
    status = await ledger_status(db, NOW)
    assert status.dead_letters_by_rule == {first.value: 2, second.value: 1}
    assert status.dead_letters == 3
    assert status.violations_open == {"error": 1}
