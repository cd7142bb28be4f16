"""What starting a plan and resuming one give back."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from langchain_core.runnables import RunnableConfig

from contracts.corrections.resume import ResumeInstruction
from contracts.decisions.model import Decision


class ResumeStatus(StrEnum):
    RESUMED = "resumed"
    """The fork (revert) or the child thread (append) ran to its end."""
    CONTINUED = "continued"
    """A redelivered instruction whose run had stopped midway: it was run on to the end."""
    ALREADY_DONE = "already_done"
    """A redelivered instruction whose run had finished: nothing ran."""
    UNRESUMABLE = "unresumable"
    """Nothing to go back to (no or foreign actor_state_ref, checkpoint gone): logged."""
    STALE = "stale"
    """A later correction superseded the branch while it ran; its own instruction resumes."""


@dataclass(frozen=True)
class Run:
    """A plan started by `GraphLedger.start`: its root and the thread's final state."""

    root: Decision
    thread_id: str
    config: RunnableConfig
    values: dict[str, Any]

    @property
    def plan_id(self) -> str:
        return self.root.plan_id


@dataclass(frozen=True)
class Resumed:
    """What `GraphLedger.resume` did with one instruction."""

    instruction: ResumeInstruction
    status: ResumeStatus
    thread_id: str | None = None
    config: RunnableConfig | None = None
    values: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
