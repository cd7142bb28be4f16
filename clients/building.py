"""Building decisions for an agent: IDs, parent chaining, context hashes, local checks.

Pure, so an agent (and its tests) can build and check decisions without a server.
A decision is checked here by the very code the recorder runs on each message
(`Decision` and `contracts.recording.message.read_message`), so whatever would be
dead-lettered later is refused now, under the same rule names, before it is sent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from pydantic import ValidationError

from contracts.corrections.resume_points import DecisionRef
from contracts.decisions import subjects
from contracts.decisions.artifacts import ArtifactRef
from contracts.decisions.context import ContextSnapshot, ResourceRef
from contracts.decisions.model import Decision
from contracts.decisions.tools import ToolCall
from contracts.decisions.types import DecisionType
from contracts.recording.message import Invalid, read_message
from contracts.shared.ids import MSG_ID_HEADER, new_id
from contracts.shared.inbound import Inbound
from contracts.shared.rules import RuleViolation, violations_from

Context = ContextSnapshot | str | bytes
"""A snapshot, or the serialised context window itself (hashed by `snapshot`)."""

Artifact = ArtifactRef | str
"""An ArtifactRef, or a path (a `file` artifact)."""


class InvalidDecision(Exception):
    """The decision breaks recorder rules; nothing was published. `violations` names each."""

    def __init__(self, violations: Sequence[RuleViolation]) -> None:
        self.violations = tuple(violations)
        super().__init__("; ".join(str(v) for v in self.violations))


def new_plan_id() -> str:
    """A plan ID to name before the plan starts: a subplan_spawn lists it in
    downstream_plan_ids, then `build_root(..., plan_id=...)` starts it."""
    return new_id()


def context_hash(context: str | bytes) -> str:
    """`sha256:<hex>` of the serialised context, the format rule `hash_format` asks for."""
    data = context.encode() if isinstance(context, str) else context
    return "sha256:" + hashlib.sha256(data).hexdigest()


def snapshot(context: str | bytes, ref: str | None = None, *,
             resources: Iterable[ResourceRef | str] = (),
             actor_state_ref: str | None = None) -> ContextSnapshot:
    """A ContextSnapshot of a context window the agent serialised.

    `ref` should say where the full context is stored, so the decision can be replayed;
    without one it is `unstored:<hash>`, which admits the context was not kept rather
    than pointing nowhere. A resource given as a string is its resource_id.
    """
    digest = context_hash(context)
    return ContextSnapshot(
        hot_context_hash=digest,
        hot_context_ref=ref or f"unstored:{digest}",
        relevant_resources=[r if isinstance(r, ResourceRef) else ResourceRef(resource_id=r)
                            for r in resources],
        actor_state_ref=actor_state_ref,
    )


def _snapshot(context: Context) -> ContextSnapshot:
    return context if isinstance(context, ContextSnapshot) else snapshot(context)


def _artifacts(artifacts: Iterable[Artifact]) -> list[ArtifactRef]:
    return [a if isinstance(a, ArtifactRef) else ArtifactRef(artifact_path=a, artifact_type="file")
            for a in artifacts]


def _build(**fields: object) -> Decision:
    try:
        return Decision.model_validate(fields)
    except ValidationError as exc:
        raise InvalidDecision(violations_from(exc)) from None


def build_root(prompt: str, *, context: Context, chosen_option: str | None = None,
               plan_id: str | None = None, project: str | None = None,
               action_template: str | None = None, rationale: str | None = None,
               actor_reasoning: str | None = None, decision_id: str | None = None,
               created_at: datetime | None = None) -> Decision:
    """The `prompt_definition` that starts a plan (a new plan_id unless one is given).

    The prompt is the root's question; `chosen_option` is how the agent framed the goal
    (default: the prompt itself). Pass `plan_id` to start a plan whose ID you already
    named, e.g. in a `subplan_spawn`'s downstream_plan_ids. `project` and
    `action_template` select the plan's invariants.
    """
    return _build(
        decision_id=decision_id or new_id(), plan_id=plan_id or new_id(),
        parent_decision_id=None, decision_type=DecisionType.PROMPT_DEFINITION,
        question=prompt, chosen_option=prompt if chosen_option is None else chosen_option,
        context_snapshot=_snapshot(context), rationale=rationale,
        actor_reasoning=actor_reasoning, project=project, action_template=action_template,
        **({"created_at": created_at} if created_at else {}),
    )


def build_child(parent: DecisionRef, decision_type: DecisionType | str, *, question: str,
                chosen_option: str, context: Context,
                alternatives: Sequence[str] = (), confidence: float | None = None,
                rationale: str | None = None, actor_reasoning: str | None = None,
                artifacts: Iterable[Artifact] = (),
                downstream_plan_ids: Sequence[str] = (),
                downstream_decision_ids: Sequence[str] = (),
                decision_id: str | None = None,
                created_at: datetime | None = None,
                tool: ToolCall | None = None) -> Decision:
    """A decision under `parent` (a Decision or a ResumePoint), in its plan, with a fresh
    ULID. `tool`: the tool a `tool_invocation` runs and its arguments, which invariants'
    checks read (docs/wire.md)."""
    return _build(
        decision_id=decision_id or new_id(), plan_id=parent.plan_id,
        parent_decision_id=parent.decision_id, decision_type=decision_type,
        question=question, chosen_option=chosen_option,
        alternatives_considered=list(alternatives), confidence_score=confidence,
        context_snapshot=_snapshot(context), rationale=rationale,
        actor_reasoning=actor_reasoning, artifacts_produced=_artifacts(artifacts),
        downstream_plan_ids=list(downstream_plan_ids),
        downstream_decision_ids=list(downstream_decision_ids), tool=tool,
        **({"created_at": created_at} if created_at else {}),
    )


def wire_message(decision: Decision) -> tuple[str, bytes, str]:
    """(subject, body, Nats-Msg-Id) for `decision`, refused with InvalidDecision if the
    recorder would refuse it on its own (fields only the recorder or a correction sets,
    say). The tree rules (parent recorded, one root per plan) need the store: they are
    checked by the recorder, and `DecisionRecorder.wait_persisted` reports them."""
    subject = subjects.recorded(decision.plan_id)
    body = decision.model_dump_json(exclude_none=False).encode()
    verdict = read_message(
        Inbound(subject=subject, headers={MSG_ID_HEADER: decision.decision_id}, data=body,
                stream_sequence=0),
        datetime.now(UTC),
    )
    if isinstance(verdict, Invalid):
        raise InvalidDecision(verdict.violations)
    return subject, body, decision.decision_id
