"""Client libraries: agents record decisions, operators correct them, subscribers react.

Everything here talks to the ledger only through its public NATS subjects (README and
docs/corrections.md), so it is also the reference for writing a client in another
language. Walkthrough and samples: docs/clients.md.
"""

from clients._connect import DEFAULT_NATS_URL, NatsUnreachable
from clients._publish import PublishFailed, RetryPolicy
from clients.approvals import GateStatus, GateVerdict
from clients.building import (
    InvalidDecision,
    build_child,
    build_root,
    context_hash,
    new_plan_id,
    snapshot,
)
from clients.correction_errors import DryRunRefused, InvalidCorrection, LedgerUnavailable
from clients.credentials import NatsCredentials
from clients.following import plan_events
from clients.operator import CorrectionClient
from clients.recorder import DecisionRecorder
from clients.recording_errors import DecisionRejectedError, StaleBranchError
from clients.resume import ResumeSubscription, parse_instruction
from clients.subscriber import Outcomes, event_subjects, outcomes, parse_event
from contracts.corrections.dry_run import DryRunReport
from contracts.corrections.events import AttemptTransitioned, CorrectionTransitioned
from contracts.corrections.refusals import CancelRefused
from contracts.corrections.resume import ResumeInstruction
from contracts.corrections.resume_points import ResumePoint, ResumeTarget
from contracts.corrections.states import CorrectionMode, CorrectionStatus
from contracts.decisions.artifacts import ArtifactRef
from contracts.decisions.context import ContextSnapshot, ResourceRef
from contracts.decisions.model import Decision
from contracts.decisions.tools import ToolCall
from contracts.decisions.types import DecisionType
from contracts.invariants.severity import Severity
from contracts.invariants.violations import InvariantViolation
from contracts.recording.events import DecisionPersisted, DecisionRejected

__all__ = [
    "DEFAULT_NATS_URL",
    "ArtifactRef",
    "AttemptTransitioned",
    "CancelRefused",
    "ContextSnapshot",
    "CorrectionClient",
    "CorrectionMode",
    "CorrectionStatus",
    "CorrectionTransitioned",
    "Decision",
    "DecisionPersisted",
    "DecisionRecorder",
    "DecisionRejected",
    "DecisionRejectedError",
    "DecisionType",
    "DryRunRefused",
    "DryRunReport",
    "GateStatus",
    "GateVerdict",
    "InvalidCorrection",
    "InvalidDecision",
    "InvariantViolation",
    "LedgerUnavailable",
    "NatsCredentials",
    "NatsUnreachable",
    "Outcomes",
    "PublishFailed",
    "ResourceRef",
    "ResumeInstruction",
    "ResumePoint",
    "ResumeSubscription",
    "ResumeTarget",
    "RetryPolicy",
    "Severity",
    "StaleBranchError",
    "ToolCall",
    "build_child",
    "build_root",
    "context_hash",
    "event_subjects",
    "new_plan_id",
    "outcomes",
    "parse_event",
    "parse_instruction",
    "plan_events",
    "snapshot",
]
