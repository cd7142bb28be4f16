"""A bulk batch as it is recorded: the filter that chose its matches, what to do to each
(revert or append, with one guidance), who asked, and one item per match.

Each item's correction ID is derived from the batch ID and the decision ID
(`correction_id_for`): requesting the same batch again publishes the same IDs, which
JetStream's duplicate window and the ledger's one-correction-per-ID rule both drop, so a
re-run (after a crash, a timeout, a second click) never corrects a decision twice.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from pydantic import Field, field_validator
from ulid import ULID

from contracts.bulk.states import SKIPPED, UNSETTLED, BatchState, ItemState
from contracts.corrections.states import CorrectionMode
from contracts.decisions.currency import Currency
from contracts.decisions.guidance import Guidance
from contracts.decisions.plan_states import PlanStatus
from contracts.decisions.search import SearchFilter
from contracts.decisions.types import DecisionType
from contracts.shared.base import Frozen
from contracts.shared.ids import Ulid
from contracts.shared.text import NonEmptyStr
from contracts.shared.timestamps import UtcTime

__all__ = ["BulkBatch", "BulkFilter", "BulkItem", "correction_id_for"]

FILTER_TEXT_MAX = 300
"""Characters of a filter's text, agent or path kept (as the console's search)."""


def correction_id_for(batch_id: str, decision_id: str) -> str:
    """The correction ID of `decision_id`'s item in batch `batch_id`: the batch's time,
    then 80 bits of a digest of both IDs. The same pair always gives the same ULID."""
    stamp = ULID.from_str(batch_id).bytes[:6]
    digest = hashlib.sha256(f"{batch_id.upper()}:{decision_id.upper()}".encode()).digest()
    return str(ULID.from_bytes(stamp + digest[:10]))


class BulkFilter(Frozen):
    """The search's filter (contracts.decisions.search), as a batch records it."""

    text: str | None = Field(default=None, max_length=FILTER_TEXT_MAX)
    decision_type: DecisionType | None = None
    agent: str | None = Field(default=None, max_length=FILTER_TEXT_MAX)
    path: str | None = Field(default=None, max_length=FILTER_TEXT_MAX)
    since: UtcTime | None = None
    until: UtcTime | None = None
    plan_status: PlanStatus | None = None
    state: Currency = Currency.ANY

    @field_validator("text", "agent", "path", mode="before")
    @classmethod
    def _valid_utf8(cls, value: object) -> object:
        """A lone surrogate (which BSON cannot carry, and no stored word holds) becomes
        `?`, so the filter is recorded and finds what the search would: nothing by it."""
        if isinstance(value, str):
            return value.encode("utf-8", "replace").decode("utf-8")
        return value

    def search(self) -> SearchFilter:
        return SearchFilter(text=self.text, decision_type=self.decision_type,
                            agent=self.agent, path=self.path, since=self.since,
                            until=self.until, currency=self.state)

    def described(self) -> str:
        """One line saying what it asks for (for lists and summaries)."""
        parts = [f'"{self.text}"'] if self.text else []
        parts += [f"{k}={v}" for k, v in (
            ("type", self.decision_type), ("agent", self.agent), ("path", self.path),
            ("since", self.since and self.since.isoformat()),
            ("until", self.until and self.until.isoformat()),
            ("plan-status", self.plan_status)) if v]
        if self.state is not Currency.ANY:
            parts.append(f"state={self.state.value}")
        return " ".join(str(p) for p in parts) or "(every decision)"


class BulkItem(Frozen):
    """One match and what became of it."""

    decision_id: Ulid
    plan_id: Ulid
    correction_id: Ulid
    state: ItemState = ItemState.PLANNED
    note: str | None = Field(default=None, description="Why it was skipped or refused.")


class BulkBatch(Frozen):
    batch_id: Ulid
    filter: BulkFilter
    mode: CorrectionMode
    guidance: Guidance | None = Field(
        default=None, description="Every correction's guidance (a revert without it "
        "gets the default naming its target).")
    reason: NonEmptyStr = Field(description="Why the operator asked, kept on the batch.")
    operator: str | None = Field(description="The principal whose key signs the "
                                 "requests, as verified; None on an unsigned ledger.")
    requested_by: NonEmptyStr = Field(description="What the operator calls itself.")
    state: BatchState = BatchState.REQUESTED
    items: list[BulkItem]
    created_at: UtcTime
    updated_at: UtcTime

    def counts(self) -> dict[str, int]:
        """Items per state, in the states' order, those with none left out."""
        seen = [i.state for i in self.items]
        return {s.value: seen.count(s) for s in ItemState if s in seen}

    @property
    def to_request(self) -> list[BulkItem]:
        return [i for i in self.items if i.state is ItemState.PLANNED]

    @property
    def requested(self) -> list[BulkItem]:
        return [i for i in self.items if i.state not in SKIPPED
                and i.state is not ItemState.PLANNED]

    @property
    def settled(self) -> bool:
        return not any(i.state in UNSETTLED for i in self.items)

    def with_items(self, items: list[BulkItem], at: datetime) -> BulkBatch:
        return self.model_copy(update={"items": items, "updated_at": at})
