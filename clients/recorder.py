"""The agent's side: record decisions on `decisions.recorded.<plan_id>` in one call each.

    async with DecisionRecorder.connect("nats://127.0.0.1:4222") as rec:
        root = await rec.root("Add rate limiting to the public API", context=window)
        choice = await rec.record(parent=root, decision_type=DecisionType.STRATEGY_CHOICE,
                                  question="Where do counters live?", chosen_option="Redis",
                                  context=window)

`record` returns once JetStream has stored the message (its PubAck), not once the
recorder has written it to MongoDB: recording is asynchronous by design, so an agent is
never slowed by the database. `wait_persisted` waits for the write when an agent needs
it (before asking for a correction of what it just recorded, say), and raises the
recorder's rejection if there was one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from nats.aio.client import Client

from clients._connect import CONNECT_TIMEOUT, DEFAULT_NATS_URL, Connecting, ConnectionOwner
from clients._durable import BACKOFF, MAX_DELIVER
from clients._publish import DEFAULT_RETRY, RetryPolicy, publish_acked
from clients.approvals import ApprovalWaiting
from clients.building import (
    Artifact,
    Context,
    build_child,
    build_root,
    wire_message,
)
from clients.credentials import NatsCredentials
from clients.resume import ResumeCallback, ResumeSubscription
from clients.signing import signer_for
from clients.telemetry import Conversations, recording
from contracts.corrections.resume_points import DecisionRef
from contracts.decisions.model import Decision
from contracts.decisions.tools import ToolCall
from contracts.decisions.types import DecisionType
from contracts.invariants import subjects as invariant_subjects
from contracts.invariants.families import VIOLATIONS
from contracts.invariants.severity import Severity
from contracts.invariants.violations import LEDGER_FIELDS, InvariantViolation
from contracts.recording.families import RECORDED
from contracts.shared.ids import new_id
from contracts.trust.signing import Signer

__all__ = ["DecisionRecorder"]



class DecisionRecorder(ApprovalWaiting, ConnectionOwner):
    """One NATS connection, and every decision it published with where the stream put it.

    Build it with `connect` (it then owns and closes the connection) or around a
    connection you already have (`DecisionRecorder(nc)`; closing it leaves `nc` open).
    """

    def __init__(self, nc: Client, *, retry: RetryPolicy = DEFAULT_RETRY,
                 owns_connection: bool = False, signer: Signer | None = None) -> None:
        """`signer` (clients.signing.signer_for): every message is signed with it."""
        super().__init__(nc, owns_connection=owns_connection)
        self._js = nc.jetstream()
        self._retry = retry
        self._signer = signer
        # decision_id -> (plan_id, stream sequence of its recorded message): where to
        # start reading for its persisted event, so waiting never scans the whole plan.
        self._published: dict[str, tuple[str, int]] = {}
        self._conversations = Conversations()

    @classmethod
    def connect(cls, url: str = DEFAULT_NATS_URL, *,
                retry: RetryPolicy = DEFAULT_RETRY,
                connect_timeout: float = CONNECT_TIMEOUT,
                credentials: NatsCredentials | None = None,
                seed: bytes | None = None) -> Connecting[DecisionRecorder]:
        """`rec = await DecisionRecorder.connect(url)`, or `async with ... as rec`; raises
        NatsUnreachable when no server answers within `connect_timeout` seconds.
        `credentials` (e.g. `NatsCredentials.from_env()`) when the URL holds no password;
        their NATS_NKEY_SEED (or `seed`) signs every message (docs/security.md)."""
        signer = signer_for(credentials, seed)
        return Connecting(url, lambda nc: cls(nc, retry=retry, owns_connection=True,
                                              signer=signer), connect_timeout, credentials)

    # --- recording --------------------------------------------------------------------

    async def root(self, prompt: str, *, context: Context, chosen_option: str | None = None,
                   plan_id: str | None = None, project: str | None = None,
                   action_template: str | None = None, rationale: str | None = None,
                   actor_reasoning: str | None = None) -> Decision:
        """Start a plan: record its `prompt_definition` and return it (see `build_root`)."""
        return await self.publish(build_root(
            prompt, context=context, chosen_option=chosen_option, plan_id=plan_id,
            project=project, action_template=action_template, rationale=rationale,
            actor_reasoning=actor_reasoning))

    async def record(self, *, parent: DecisionRef, decision_type: DecisionType | str,
                     question: str, chosen_option: str, context: Context,
                     alternatives: Sequence[str] = (), confidence: float | None = None,
                     rationale: str | None = None, actor_reasoning: str | None = None,
                     artifacts: Sequence[Artifact] = (),
                     downstream_plan_ids: Sequence[str] = (),
                     downstream_decision_ids: Sequence[str] = (),
                     created_at: datetime | None = None,
                     tool: ToolCall | None = None) -> Decision:
        """Record a decision under `parent` (same plan, fresh ULID) and return it.

        `parent` is a Decision, or a ResumePoint (a resume instruction's `resume_at`, a
        StaleBranchError's `resume_at`): anything naming a decision and its plan. `tool`
        names a tool_invocation's tool and arguments (what checked invariants read)."""
        return await self.publish(build_child(
            parent, decision_type, question=question, chosen_option=chosen_option,
            context=context, alternatives=alternatives, confidence=confidence,
            rationale=rationale, actor_reasoning=actor_reasoning, artifacts=artifacts,
            downstream_plan_ids=downstream_plan_ids,
            downstream_decision_ids=downstream_decision_ids, created_at=created_at,
            tool=tool))

    async def publish(self, decision: Decision) -> Decision:
        """Publish a decision built elsewhere: checked locally, then sent until acked.

        Raises InvalidDecision (nothing sent) or PublishFailed (the stream never
        acknowledged it; publishing the same decision again later is safe).
        """
        subject, body, msg_id = wire_message(decision)
        # Its span (contracts.shared.tracing: invoke_agent, execute_tool or
        # record_decision) is the trace context the message carries to the workers.
        with recording(decision, self._conversations.learn(decision)):
            ack = await publish_acked(self._js, subject, body, msg_id, self._retry,
                                      signer=self._signer, kind=RECORDED.name)
        self._published[decision.decision_id] = (decision.plan_id, ack.seq)
        return decision

    def conversation_of(self, plan_id: str) -> str:
        """The root plan of `plan_id`'s lineage as far as this recorder saw it (its
        `gen_ai.conversation.id`): a child plan's root names its parent."""
        return self._conversations.of(plan_id)

    # --- resuming after a correction ---------------------------------------------------

    async def on_resume(self, callback: ResumeCallback, *, plan_id: str | None = None,
                        plan_ids: Sequence[str] = (), durable: str | None = None,
                        ack_wait: float = 30.0, from_start: bool | None = None,
                        max_deliver: int = MAX_DELIVER,
                        backoff: Sequence[float] = BACKOFF) -> ResumeSubscription:
        """Hand each ResumeInstruction of these plans to `callback`, in the background.

        A durable consumer (default name `resume_<principal>`, the connection's principal,
        or without one `resume-<plan_id>` for one plan) on `corrections.resume.<plan_id>`:
        an instruction published while the runtime was down arrives when it comes back,
        and is acked only after `callback` returned (see clients/resume.py). Returns the
        started subscription; `await sub.stop()` ends it, or use `async with`.
        """
        plans = [*([plan_id] if plan_id else []), *plan_ids]
        sub = ResumeSubscription(self._nc, callback, plan_ids=plans, durable=durable,
                                 ack_wait=ack_wait, from_start=from_start,
                                 max_deliver=max_deliver, backoff=backoff)
        return await sub.start()

    # --- invariants -------------------------------------------------------------------

    async def report_violation(self, *, invariant_id: str, plan_id: str,
                               severity: Severity | str, details: str,
                               decision_id: str | None = None,
                               violation_id: str | None = None) -> InvariantViolation:
        """Report an InvariantViolation on `invariants.violations.<plan_id>`.

        An `error` violation blocks the plan's Execute-phase decisions until an operator
        resolves it (docs/invariants.md). Same retry guarantee as decisions: the
        violation_id is the Nats-Msg-Id.
        """
        violation = InvariantViolation(
            violation_id=violation_id or new_id(), invariant_id=invariant_id,
            plan_id=plan_id, decision_id=decision_id, severity=Severity(severity),
            details=details)
        body = violation.model_dump_json(exclude={"reported_at", *LEDGER_FIELDS}).encode()
        await publish_acked(self._js, invariant_subjects.violations(plan_id), body,
                            violation.violation_id, self._retry, signer=self._signer,
                            kind=VIOLATIONS.name)
        return violation
