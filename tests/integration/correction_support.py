"""Trees, requests and observations shared by the correction tests."""

from __future__ import annotations

import errno
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
from pymongo.asynchronous.database import AsyncDatabase

from contracts.corrections.requests import CorrectionRequest
from contracts.corrections.states import CorrectionMode
from contracts.decisions.model import Decision
from contracts.shared.ids import new_id
from store.database import Document
from tests.bulk import load_plan
from tests.factories import decision, root
from tests.integration.wire import events


def _d(plan_id: str, parent: str | None, kind: str = "strategy_choice",
       **fields: Any) -> Decision:
    raw = root(plan_id, **fields) if parent is None else decision(plan_id, parent, kind, **fields)
    raw.setdefault("artifacts_produced", [])
    return Decision.model_validate(raw)


@dataclass
class RevertScene:
    """A plan whose target T has 4 descendants and spawned a 2-decision child plan:
    reverting T affects exactly 7 decisions; the sibling S and the ancestors are not."""

    plan_id: str
    child_plan_id: str
    root: Decision
    parent: Decision
    target: Decision
    sibling: Decision
    affected: list[str]
    unaffected: list[str]
    files: list[str]


async def revert_scene(db: AsyncDatabase[Document], artifacts_root: Path | None = None
                       ) -> RevertScene:
    plan, child = new_id(), new_id()
    files = ["src/api/limits.py", "src/api/middleware.py", "docs/limits.md"]
    if artifacts_root is not None:
        for f in files:
            (artifacts_root / f).parent.mkdir(parents=True, exist_ok=True)
            (artifacts_root / f).write_text(f"contents of {f}\n")
    art = [{"artifact_path": f, "artifact_type": "file"} for f in files]
    r = _d(plan, None, artifacts_produced=[])
    a = _d(plan, r.decision_id, "strategy_choice", artifacts_produced=[])
    t = _d(plan, a.decision_id, "implementation_choice", artifacts_produced=[art[0]])
    s = _d(plan, a.decision_id, "implementation_choice", artifacts_produced=[])
    b = _d(plan, t.decision_id, "tool_invocation", artifacts_produced=[art[1]])
    c = _d(plan, t.decision_id, "subplan_spawn", downstream_plan_ids=[child],
           artifacts_produced=[])
    d = _d(plan, b.decision_id, "tool_invocation", artifacts_produced=[art[2]])
    e = _d(plan, d.decision_id, "validation_response", artifacts_produced=[])
    p0 = _d(child, None, artifacts_produced=[])
    p1 = _d(child, p0.decision_id, "strategy_choice", artifacts_produced=[])
    await load_plan(db, [r, a, t, s, b, c, d, e])
    await load_plan(db, [p0, p1])
    affected = [x.decision_id for x in (t, b, c, d, e, p0, p1)]
    return RevertScene(plan, child, r, a, t, s, affected,
                       [r.decision_id, a.decision_id, s.decision_id], files)


async def chain_plan(db: AsyncDatabase[Document], size: int = 3) -> list[Decision]:
    plan = new_id()
    out = [_d(plan, None)]
    for _ in range(size - 1):
        out.append(_d(plan, out[-1].decision_id, "strategy_choice"))
    return await load_plan(db, out)


def request(plan_id: str, decision_id: str, mode: str = "revert", **fields: Any
            ) -> CorrectionRequest:
    return CorrectionRequest(plan_id=plan_id, decision_id=decision_id,
                             mode=CorrectionMode(mode), guidance="Use a token bucket instead.",
                             requested_by="alice", **fields)


CHAIN_COUNTER = ("chain_length", "chain_head")


def unchained(plans: list[Document]) -> list[Document]:
    """Plan documents without their record chain's counter: a correction that changes
    nothing in the tree still chains its request and its end (docs/security.md)."""
    return [{k: v for k, v in p.items() if k not in CHAIN_COUNTER} for p in plans]


async def dump(db: AsyncDatabase[Document]) -> dict[str, list[Document]]:
    """Every document of every collection, sorted, for before/after comparisons."""
    out = {}
    for name in sorted(await db.list_collection_names()):
        docs = await db[name].find({}).to_list()
        out[name] = sorted(docs, key=lambda d: str(d["_id"]))
    return out


async def transition_events(nc: nats.NATS, settle: float = 0.5) -> list[dict[str, Any]]:
    """Every correction event in the stream, in stream order."""
    return [body for _, body, _ in await events(nc, "corrections.events.>", settle)]


def per_status(evs: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    return Counter((e["correction_id"], e["to_status"]) for e in evs)


def statuses_of(evs: list[dict[str, Any]], correction_id: str) -> list[str]:
    return [e["to_status"] for e in evs if e["correction_id"] == correction_id]


def body(data: bytes) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(data)
    return loaded


async def artifact_plan(db: AsyncDatabase[Document], paths: list[str]) -> tuple[str, str]:
    """A root and a target decision that produced `paths`: (plan_id, target_id)."""
    plan = new_id()
    r = _d(plan, None)
    t = _d(plan, r.decision_id, "tool_invocation", artifacts_produced=[
        {"artifact_path": p, "artifact_type": "file"} for p in paths])
    await load_plan(db, [r, t])
    return plan, t.decision_id


def release(fifo: Path) -> None:
    """Let go every thread still waiting in the FIFO's open (a writer comes and goes)."""
    for _ in range(100):
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as exc:
            assert exc.errno == errno.ENXIO  # no reader waits any more
            return
