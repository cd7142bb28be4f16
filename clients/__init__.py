"""Client libraries: agents record decisions, operators correct them, subscribers react.

Everything here talks to the ledger only through its public NATS subjects (README and
docs/corrections.md), so it is also the reference for writing a client in another
language. Walkthrough and samples: docs/clients.md.

Importing this package imports none of them: each name is imported on first use (PEP
562), so a process that needs one client (the CLI reading credentials, an agent
recording) does not pay for the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_WHERE = {
    "ArtifactRef": "contracts.decisions.artifacts",
    "AttemptTransitioned": "contracts.corrections.events",
    "CancelRefused": "contracts.corrections.refusals",
    "ContextSnapshot": "contracts.decisions.context",
    "CorrectionClient": "clients.operator",
    "CorrectionMode": "contracts.corrections.states",
    "CorrectionStatus": "contracts.corrections.states",
    "CorrectionTransitioned": "contracts.corrections.events",
    "DEFAULT_NATS_URL": "clients._connect",
    "Decision": "contracts.decisions.model",
    "DecisionPersisted": "contracts.recording.events",
    "DecisionRecorder": "clients.recorder",
    "DecisionRejected": "contracts.recording.events",
    "DecisionRejectedError": "clients.recording_errors",
    "DecisionType": "contracts.decisions.types",
    "DryRunRefused": "clients.correction_errors",
    "DryRunReport": "contracts.corrections.dry_run",
    "GateStatus": "clients.approvals",
    "GateVerdict": "clients.approvals",
    "InvalidCorrection": "clients.correction_errors",
    "InvalidDecision": "clients.building",
    "InvariantViolation": "contracts.invariants.violations",
    "LedgerUnavailable": "clients.correction_errors",
    "NatsCredentials": "clients.credentials",
    "NatsUnreachable": "clients._connect",
    "Outcomes": "clients.subscriber",
    "PublishFailed": "clients._publish",
    "ResourceRef": "contracts.decisions.context",
    "ResumeInstruction": "contracts.corrections.resume",
    "ResumePoint": "contracts.corrections.resume_points",
    "ResumeSubscription": "clients.resume",
    "ResumeTarget": "contracts.corrections.resume_points",
    "RetryPolicy": "clients._publish",
    "Severity": "contracts.invariants.severity",
    "StaleBranchError": "clients.recording_errors",
    "ToolCall": "contracts.decisions.tools",
    "build_child": "clients.building",
    "build_root": "clients.building",
    "context_hash": "clients.building",
    "event_subjects": "clients.subscriber",
    "new_plan_id": "clients.building",
    "outcomes": "clients.subscriber",
    "parse_event": "clients.subscriber",
    "parse_instruction": "clients.resume",
    "plan_events": "clients.following",
    "snapshot": "clients.building",
}
"""Each public name -> the module that defines it."""


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'clients' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


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
