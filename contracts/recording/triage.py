"""Deciding a batch: each candidate accepted, refused, set aside as a redelivery or a
retry, or left to wait for its parent, against the stored facts and the rest of the
batch.

The recorder reads each message (`contracts.recording.message`), asks the store for the
facts (`StoredFacts`) and calls `triage_batch`. Deterministic and free of I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from contracts.decisions.model import Decision
from contracts.invariants.blocking import ReconciliationBlocked, check_not_blocked
from contracts.recording.claims import ClaimRules
from contracts.recording.facts import Resume, StoredFacts
from contracts.recording.message import Candidate
from contracts.recording.ownership import OwnershipRules
from contracts.shared.rules import Rule, RuleViolation


@dataclass(frozen=True)
class BatchTriage:
    """What to do with each message of a batch. `accept` is in write order: a parent
    always comes before its children, so sequence numbers follow the tree.

    Of the messages already stored with the same content, `redelivered` are the very
    message that wrote the decision (a worker died before acking it: its persisted
    event may not have gone out, so it is published again under the same Nats-Msg-Id,
    which JetStream drops if it had it), and `duplicate` are other messages with the
    same decision (a publisher's retry): for them nothing is written or published."""

    accept: list[Candidate] = field(default_factory=list)
    redelivered: list[Candidate] = field(default_factory=list)
    duplicate: list[Candidate] = field(default_factory=list)
    reject: list[tuple[Candidate, tuple[RuleViolation, ...]]] = field(default_factory=list)
    wait: list[Candidate] = field(default_factory=list)
    resume: dict[int, Resume] = field(default_factory=dict)
    """By stream sequence: where a decision refused by a correction's rule should go."""


class Admission(Protocol):
    """The last check of a decision the tree rules accept (the invariants' gate,
    contracts.invariants.gate): a refusal, or None to accept it."""

    def admit(self, d: Decision) -> RuleViolation | None: ...


def triage_batch(candidates: Sequence[Candidate], facts: StoredFacts,
                 gate: Admission | None = None) -> BatchTriage:
    """Decide every candidate of a batch against what is stored and what is beside it,
    and (`gate`) the invariants in force."""
    triage = BatchTriage()
    fresh = _sort_out_known(candidates, facts, triage)
    # Accept in dependency order: a child whose parent is in the batch waits for the
    # parent's verdict; stop when a pass decides nothing more.
    tree = _TreeState(dict(facts.plan_of), dict(facts.root_of_plan), facts.blocked_plans,
                      facts.superseded, facts.rolled_back,
                      claims=ClaimRules(dict(facts.claims), facts.plan_ancestors,
                                        facts.dependent_plan),
                      blocking_ancestors=facts.blocking_ancestors,
                      owners=OwnershipRules(dict(facts.ownership), dict(facts.created_at)),
                      gate=gate)
    pending = fresh
    while pending:
        undecided = [c for c in pending if not tree.decide(c, triage)]
        if len(undecided) == len(pending):
            break
        pending = undecided
    triage.wait.extend(pending)
    return triage


def _sort_out_known(candidates: Sequence[Candidate], facts: StoredFacts,
                    triage: BatchTriage) -> list[Candidate]:
    """Put redeliveries, retries and conflicts aside; return the decisions new to the store."""
    seen: dict[str, Candidate] = {}
    fresh: list[Candidate] = []
    for c in candidates:
        d = c.decision
        stored = facts.existing.get(d.decision_id)
        twin = seen.get(d.decision_id)
        known = stored.content_hash if stored else (twin.content_hash if twin else None)
        if known is None:
            seen[d.decision_id] = c
            fresh.append(c)
        elif known != c.content_hash:
            triage.reject.append((c, (RuleViolation(
                rule=Rule.DECISION_ID_CONFLICT, field="decision_id",
                message=f"decision {d.decision_id} is already recorded with different content; "
                "a new choice needs a new decision_id"),)))
        elif stored and stored.recorded_from == c.stream_sequence:
            triage.redelivered.append(c)
        else:
            triage.duplicate.append(c)
    return fresh


@dataclass
class _TreeState:
    """The tree as the batch is decided: stored facts plus what the batch accepted."""

    plan_of: dict[str, str]
    roots: dict[str, str]
    blocked: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    superseded: Mapping[str, Resume] = field(default_factory=dict)
    rolled_back: Mapping[str, Resume] = field(default_factory=dict)
    rejected: set[str] = field(default_factory=set)
    stale: dict[str, Resume] = field(default_factory=dict)
    """Decisions of the batch refused as stale: their children are stale too."""
    claims: ClaimRules = field(default_factory=ClaimRules)
    blocking_ancestors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    owners: OwnershipRules = field(default_factory=OwnershipRules)
    gate: Admission | None = None

    def decide(self, c: Candidate, triage: BatchTriage) -> bool:
        """Accept or reject `c`, or return False if its parent is still undecided."""
        d = c.decision
        stale = self._stale(d)
        if stale is not None:
            violation, resume = stale
            self.rejected.add(d.decision_id)
            self.stale[d.decision_id] = resume
            triage.reject.append((c, (violation,)))
            triage.resume[c.stream_sequence] = resume
            return True
        broken = self._broken_rule(d)
        if broken is None and d.parent_decision_id is not None \
                and d.parent_decision_id not in self.plan_of:
            return False
        if broken is None:
            broken = self.claims.broken(d, self.plan_of) \
                or self.owners.broken(c, self.claims.claims) \
                or (self.gate.admit(d) if self.gate is not None else None)
        if broken is None:
            self.plan_of[d.decision_id] = d.plan_id
            if d.is_root:
                self.roots[d.plan_id] = d.decision_id
            self.claims.note(d, self.owners.note(c))
            triage.accept.append(c)
        else:
            self.rejected.add(d.decision_id)
            triage.reject.append((c, (broken,)))
        return True

    def _stale(self, d: Decision) -> tuple[RuleViolation, Resume] | None:
        """A decision a correction already made stale: its plan was rolled back, or its
        parent superseded. Checked first, since it tells the agent where to go on."""
        resume = self.rolled_back.get(d.plan_id)
        if resume is not None:
            return RuleViolation(
                rule=Rule.PLAN_ROLLED_BACK, field="plan_id",
                message=f"plan {d.plan_id} was rolled back{resume.where()}"), resume
        parent = d.parent_decision_id
        resume = self.superseded.get(parent) if parent is not None else None
        if resume is not None:
            return RuleViolation(
                rule=Rule.PARENT_SUPERSEDED, field="parent_decision_id",
                message=f"parent {parent} was superseded{resume.where()}"), resume
        resume = self.stale.get(parent) if parent is not None else None
        if resume is not None:
            return RuleViolation(
                rule=Rule.PARENT_SUPERSEDED, field="parent_decision_id",
                message=f"parent {parent} was refused in the same batch: its branch was "
                f"superseded{resume.where()}"), resume
        return None

    def _broken_rule(self, d: Decision) -> RuleViolation | None:
        try:
            check_not_blocked(d.plan_id, d.decision_type, self.blocked,
                              self.blocking_ancestors.get(d.plan_id, ()))
        except ReconciliationBlocked as exc:
            return RuleViolation(rule=Rule.RECONCILIATION_BLOCKED, field="decision_type",
                                 message=str(exc))
        if d.is_root:
            root = self.roots.get(d.plan_id)
            if root is not None and root != d.decision_id:
                return RuleViolation(
                    rule=Rule.ONE_ROOT_PER_PLAN, field="decision_type",
                    message=f"plan {d.plan_id} already has the root {root}; "
                    "a plan has one prompt_definition")
            return None
        parent = d.parent_decision_id
        if parent in self.rejected:
            return RuleViolation(
                rule=Rule.PARENT_EXISTS, field="parent_decision_id",
                message=f"parent {parent} was rejected in the same batch")
        if parent in self.plan_of and self.plan_of[parent] != d.plan_id:
            return RuleViolation(
                rule=Rule.PARENT_IN_SAME_PLAN, field="parent_decision_id",
                message=f"parent {parent} belongs to plan {self.plan_of[parent]}, "
                f"not {d.plan_id}")
        return None
