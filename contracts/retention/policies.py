"""Retention policies: what is kept how long, and which plans may go together
(docs/retention.md, Retention).

`RETENTION_POLICIES` is a JSON list; each policy names what it applies to, an age in
days and an action:

    {"name": "rolled-back-text", "plans": ["rolled_back"], "older_than_days": 30,
     "action": "erase"}
    {"name": "completed", "plans": ["completed", "abandoned"], "older_than_days": 365,
     "action": "remove", "export": true}
    {"name": "letters", "records": "dead_letters", "older_than_days": 90}
    {"name": "violations", "records": "resolved_violations", "older_than_days": 90}

A plan's age counts from when it reached its status (rolled back, completed or
abandoned; an active plan from its creation). `erase` removes its text and keeps the
tree (contracts.retention.erasure); `remove` deletes its records, after exporting them
in the audit export format when `export` is set. Dead letters are deleted; a resolved
violation's details are erased (its record is chained, so it stays).

Removal never leaves a plan without its parent's record nor a correction without its
target: plans go by **family** (a top plan and every plan spawned below it, which are
the only plans a correction or a decision's links reach, ADR 0020), and a family goes
only when every plan of it is due (`removable_families`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from contracts.decisions.plan_states import PlanStatus

MAX_POLICIES = 20


class Action(StrEnum):
    ERASE = "erase"
    REMOVE = "remove"


class Records(StrEnum):
    PLANS = "plans"
    DEAD_LETTERS = "dead_letters"
    RESOLVED_VIOLATIONS = "resolved_violations"


@dataclass(frozen=True)
class Policy:
    name: str
    older_than_days: float
    records: Records = Records.PLANS
    statuses: tuple[PlanStatus, ...] = ()
    action: Action = Action.REMOVE
    export: bool = False

    def describe(self) -> str:
        what = (f"{'/'.join(s.value for s in self.statuses)} plans"
                if self.records is Records.PLANS else self.records.value.replace("_", " "))
        verb = {Records.DEAD_LETTERS: "removed",
                Records.RESOLVED_VIOLATIONS: "details erased"}.get(self.records)
        if verb is None:
            verb = ("text erased" if self.action is Action.ERASE
                    else "exported, then removed" if self.export else "removed")
        return f"{what}: {verb} after {self.older_than_days:g} days"


def _policy(raw: object, i: int) -> Policy:
    if not isinstance(raw, Mapping):
        raise ValueError(f"RETENTION_POLICIES[{i}]: an object")
    name = str(raw.get("name") or f"policy-{i}")[:40]
    try:
        days = float(raw["older_than_days"])
        records = Records(raw.get("records", "plans"))
        statuses = tuple(PlanStatus(s) for s in raw.get("plans") or [])
        action = Action(raw.get("action", "remove"))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"RETENTION_POLICIES[{i}] ({name}): {exc!s:.200}") from None
    if days <= 0:
        raise ValueError(f"RETENTION_POLICIES[{i}] ({name}): older_than_days must be > 0")
    if records is Records.PLANS and not statuses:
        raise ValueError(f"RETENTION_POLICIES[{i}] ({name}): name the plan statuses "
                         "(\"plans\": [\"completed\", ...])")
    return Policy(name, days, records, statuses, action, bool(raw.get("export", False)))


def parse_policies(text: str) -> tuple[Policy, ...]:
    """RETENTION_POLICIES as policies (empty: none); ValueError naming what is wrong."""
    if not text.strip():
        return ()
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"RETENTION_POLICIES: not JSON ({exc})") from None
    if not isinstance(raw, list) or len(raw) > MAX_POLICIES:
        raise ValueError(f"RETENTION_POLICIES: a JSON list of at most {MAX_POLICIES} "
                         "policies")
    return tuple(_policy(p, i) for i, p in enumerate(raw))


@dataclass(frozen=True)
class Families:
    """Due plans grouped by family: those that may go, and those held back."""

    removable: list[list[str]]
    held: list[str]


def removable_families(due: Iterable[str], family_of: Mapping[str, list[str]]) -> Families:
    """Group `due` plans by family (`family_of`: a plan -> every plan of its family); a
    family goes only when all of it is due, else its due plans are held."""
    due_set = set(due)
    seen: set[str] = set()
    removable: list[list[str]] = []
    held: list[str] = []
    for plan_id in sorted(due_set):
        if plan_id in seen:
            continue
        family = sorted(set(family_of.get(plan_id) or [plan_id]) | {plan_id})
        seen.update(family)
        if due_set.issuperset(family):
            removable.append(family)
        else:
            held += [p for p in family if p in due_set]
    return Families(removable, held)
