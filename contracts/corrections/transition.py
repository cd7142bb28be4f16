"""One entry of a correction's history, and what a transition may record besides its
new status. The entry is also the outbox row the transition's event is published from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from pydantic import Field

from contracts.corrections.archive.rules import NotCopiedArtifact
from contracts.corrections.states import CorrectionStatus
from contracts.shared.base import Frozen
from contracts.shared.ids import Ulid, new_id
from contracts.shared.timestamps import UtcTime
from contracts.trust.signing import Signature

ERROR_MAX_CHARS = 2_000
"""Longest `error` a FAILED correction records (longer ones are cut, see bounded_text)."""


def bounded_text(text: str, limit: int = ERROR_MAX_CHARS) -> str:
    """`text` cut to `limit` characters, saying how much was dropped."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


class Transition(Frozen):
    """One entry of a correction's history; also the outbox row its event is published from."""

    event_id: Ulid = Field(
        default_factory=new_id,
        description="ULID of the event announcing this transition; fixed here so a "
        "republish after a crash carries the same ID.",
    )
    from_status: CorrectionStatus | None = Field(
        description="Status before; None for the entry that created the correction."
    )
    to_status: CorrectionStatus = Field(description="Status after.")
    at: UtcTime = Field(description="When it happened (UTC).")
    reason: str | None = Field(default=None, description="Why, e.g. a cancel reason.")
    error: str | None = Field(default=None, description="What went wrong (to FAILED only).")
    retry_id: Ulid | None = Field(
        default=None, description="FAILED -> PENDING only: the operator's RetryRequest."
    )
    attempts_before: int | None = Field(
        default=None, ge=0,
        description="FAILED -> PENDING only: how many attempts the earlier rounds made, so "
        "the new round's attempts are counted against max_attempts without trusting clocks.",
    )
    by: str | None = Field(
        default=None, description="An operator's cancel, fail or retry: the principal whose "
        "signature the ledger verified; None for the ledger's own steps and unsigned "
        "commands.")
    signature: Signature | None = Field(
        default=None, description="The verified signature of the command that made it.")


class TransitionInfo(TypedDict, total=False):
    """What `Correction.transition` may record besides the new status."""

    reason: str | None
    error: str
    new_decision_id: str
    superseded_ids: Sequence[str]
    child_plans_rolled_back: Sequence[str]
    child_plans_spawned: Sequence[str]
    archived_artifacts_path: str | None
    archive_not_copied: Sequence[NotCopiedArtifact]
    archive_not_copied_count: int
    retry_id: str
    attempts_before: int
    by: str | None
    signature: Signature | None
