"""Plans for the bulk correction tests and bench: many small plans, each with the same
bad choice twice, the second inside the first's subtree (a conflict)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from contracts.decisions.model import Decision
from contracts.shared.ids import new_id
from store.database import Document
from tests.bulk import load_plan
from tests.factories import decision, root

BAD = "Pin leftpad to the yanked release"
"""The chosen option every loaded plan made, twice: `leftpad yanked` finds both."""


@dataclass
class Loaded:
    plan_ids: list[str]
    outer: list[str]
    """Each plan's first bad decision (the one a revert batch requests)."""
    inner: list[str]
    """Each plan's second one, inside the first's subtree (covered)."""


def _d(plan: str, parent: str | None, kind: str = "strategy_choice", **f: Any) -> Decision:
    raw = root(plan, **f) if parent is None else decision(plan, parent, kind, **f)
    return Decision.model_validate(raw)


async def load_plans(db: AsyncDatabase[Document], count: int, *,
                     project: str | None = None) -> Loaded:
    """`count` plans of 5 decisions: root, the bad strategy, an implementation under it
    with an artifact, the bad tool invocation under that, and a sibling of the strategy
    that nothing matches."""
    loaded = Loaded([], [], [])
    for i in range(count):
        plan = new_id()
        r = _d(plan, None, project=project)
        outer = _d(plan, r.decision_id, question="Which left-pad?", chosen_option=BAD)
        impl = _d(plan, outer.decision_id, "implementation_choice",
                  artifacts_produced=[{"artifact_path": f"src/pad/p{i}.py",
                                       "artifact_type": "file"}])
        inner = _d(plan, impl.decision_id, "tool_invocation", question="Install?",
                   chosen_option=BAD)
        other = _d(plan, r.decision_id, question="Which formatter?", chosen_option="black")
        await load_plan(db, [r, outer, impl, inner, other])
        loaded.plan_ids.append(plan)
        loaded.outer.append(outer.decision_id)
        loaded.inner.append(inner.decision_id)
    return loaded
