"""Whether the ledger still holds what refused a dead letter: the state a retry needs
changed (services/dead_letters.py asks before republishing anything).

Only the rules whose verdict depends on the ledger's state are looked at
(contracts.shared.dead_letter_care.STATE_RULES); the payload is read as JSON for the
one ID each needs (a parent, an invariant), and a payload that does not read says
nothing: the retry goes ahead and the workers judge it as ever.
"""

from __future__ import annotations

import json
from typing import Any

from contracts.shared.dead_letter import DeadLetter
from contracts.shared.ids import is_ulid
from contracts.shared.rules import Rule
from services.read_ports import LedgerReads


def _field(letter: DeadLetter, name: str) -> str | None:
    try:
        body: Any = json.loads(letter.payload)
    except ValueError:
        return None
    value = body.get(name) if isinstance(body, dict) else None
    return value.upper() if isinstance(value, str) and is_ulid(value) else None


async def _parent_missing(reads: LedgerReads, letter: DeadLetter) -> str | None:
    parent = _field(letter, "parent_decision_id")
    if parent is None or await reads.decisions.get(parent) is not None:
        return None
    return f"its parent {parent} is still not recorded (record the parent first)"


async def _plan_blocked(reads: LedgerReads, letter: DeadLetter) -> str | None:
    if letter.plan_id is None or not is_ulid(letter.plan_id):
        return None
    open_ = await reads.violations.find(letter.plan_id.upper(), unresolved_only=True)
    blocking = [v for v in open_ if v.blocks]
    if not blocking:
        return None
    return (f"plan {letter.plan_id} is still blocked by violation "
            f"{blocking[0].violation_id} (agents invariant resolve "
            f"{blocking[0].violation_id})")


async def _invariant_unknown(reads: LedgerReads, letter: DeadLetter) -> str | None:
    wanted = _field(letter, "invariant_id")
    if wanted is None or any(i.id == wanted for i in await reads.invariants.find()):
        return None
    return f"invariant {wanted} is still not known (agents invariant add)"


async def still_blocked(reads: LedgerReads, letter: DeadLetter) -> str | None:
    """The sentence saying what still refuses the letter, or None when a retry may pass."""
    rules = {e.rule for e in letter.errors}
    checks = ((Rule.PARENT_EXISTS, _parent_missing),
              (Rule.RECONCILIATION_BLOCKED, _plan_blocked),
              (Rule.INVARIANT_EXISTS, _invariant_unknown))
    for rule, check in checks:
        if rule in rules and (why := await check(reads, letter)) is not None:
            return why
    return None
