"""Valid decisions and plan trees, as an agent would publish them."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from contracts.shared.ids import new_id

BRANCHING_TYPES = ["strategy_choice", "implementation_choice", "resource_selection",
                   "tool_invocation", "error_recovery", "validation_response", "subplan_spawn"]


def decision(plan_id: str, parent: str | None, decision_type: str = "strategy_choice",
             **fields: Any) -> dict[str, Any]:
    body = f"{plan_id}:{parent}:{decision_type}:{fields.get('question', '')}"
    d: dict[str, Any] = {
        "decision_id": new_id(),
        "plan_id": plan_id,
        "parent_decision_id": parent,
        "decision_type": decision_type,
        "question": "Which approach should the agent take?",
        "chosen_option": "Refactor the module behind a feature flag",
        "alternatives_considered": ["Rewrite from scratch", "Patch in place"],
        "confidence_score": 0.8,
        "context_snapshot": {
            "hot_context_hash": "sha256:" + hashlib.sha256(body.encode()).hexdigest(),
            "hot_context_ref": f"s3://contexts/{plan_id}/{new_id()}.json",
            "relevant_resources": [{"resource_id": "repo:app", "path": "src/app.py"}],
            "actor_state_ref": None,
        },
        "rationale": "Lowest risk for the deadline.",
        "actor_reasoning": "The flag lets us roll back quickly.",
        "downstream_decision_ids": [],
        "downstream_plan_ids": [],
        "artifacts_produced": [{"artifact_path": "src/app.py", "artifact_type": "file"}],
    }
    d.update(fields)
    return d


def root(plan_id: str | None = None, **fields: Any) -> dict[str, Any]:
    return decision(plan_id or new_id(), None, "prompt_definition",
                    question="What should the plan achieve?",
                    chosen_option="Add rate limiting to the public API", **fields)


def plan_tree(size: int, plan_id: str | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """A random tree of `size` decisions, parents always listed before children."""
    rng = random.Random(seed)
    first = root(plan_id)
    out = [first]
    for i in range(1, size):
        parent = out[rng.randrange(len(out))]
        out.append(decision(first["plan_id"], parent["decision_id"],
                            rng.choice(BRANCHING_TYPES), question=f"Choice {i}?"))
    return out


def encode(d: dict[str, Any]) -> bytes:
    return json.dumps(d).encode()


def headers(d: dict[str, Any]) -> dict[str, str]:
    return {"Nats-Msg-Id": d["decision_id"]}


def subject(d: dict[str, Any]) -> str:
    return f"decisions.recorded.{d['plan_id']}"
