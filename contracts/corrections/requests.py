"""The commands an operator sends: request a correction (or its dry run), cancel, fail
or retry one."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from contracts.corrections.states import CorrectionMode
from contracts.decisions.guidance import Guidance
from contracts.shared.base import Frozen
from contracts.shared.ids import Ulid, new_id
from contracts.shared.text import NonEmptyStr
from contracts.shared.timestamps import UtcTime, utc_now

REASON_MAX_CHARS = 1_000
"""Longest cancel or fail reason: it travels in events, which must stay small."""


def reverted_choice(original: str) -> str:
    """How a replacement's chosen_option reads when the operator named none and gave no
    guidance. It must not read as the original choice made again (`Revert: <original>`
    did, in a tree that shows only chosen options): it says nothing was chosen instead."""
    return f"(reverted; no replacement chosen) was: {original}"


def default_revert_guidance(decision_id: str, requested_by: str | None) -> str:
    """The guidance of a revert requested without any (the specification's `agents plan
    correct --mode=revert ID`): it names the target and the operator. The one place this text is
    made; CorrectionRequest fills it in, whoever builds the request (CLI, client, raw
    publisher), so `guidance_defaulted` can recognise it later."""
    who = f" requested by {requested_by}" if requested_by else ""
    return f"Revert of decision {decision_id.upper()}{who}"


class CorrectionRequest(Frozen):
    """Published by an operator to `corrections.requested.<plan_id>`, Nats-Msg-Id = correction_id.

    The same body, sent as a request to `corrections.dryrun.<plan_id>`, asks for a dry run.
    """

    correction_id: Ulid = Field(
        default_factory=new_id,
        description="ULID chosen by the operator; a second request with it is ignored.",
        examples=["01JD7X4Q9R8N2V5K3M6P1T0W7Y"],
    )
    plan_id: Ulid = Field(description="Plan of the target; must match the subject.")
    decision_id: Ulid = Field(description="The decision to correct (the target).")
    mode: CorrectionMode = Field(
        description="revert: supersede the target's subtree; append: spawn a child plan.",
        examples=["revert"],
    )
    guidance: Guidance = Field(
        description="Operator guidance, 1-10,000 characters, not blank. Required for an "
        "append; a revert without it gets 'Revert of decision <decision_id> requested by "
        "<requested_by>'.",
        examples=["Use an online migration that avoids table locks."],
    )
    requested_by: NonEmptyStr | None = Field(
        default=None, description="What the sender calls itself, kept on the correction as "
        "claimed_by: who asked is the principal whose signature the ledger verified "
        "(docs/security.md), never this field.", examples=["alice"])
    chosen_option: NonEmptyStr | None = Field(
        default=None,
        description="Revert only: chosen_option of the replacement decision (default: the "
        "guidance, or '(reverted; no replacement chosen) was: <original chosen_option>' "
        "when the guidance was defaulted).",
    )
    requested_at: UtcTime = Field(default_factory=utc_now, description="UTC request time.")

    @model_validator(mode="before")
    @classmethod
    def _default_revert_guidance(cls, data: Any) -> Any:
        # Only a revert has a sensible default: an append's guidance is the child plan's
        # prompt, which nothing can make up.
        if (isinstance(data, dict) and data.get("guidance") is None
                and data.get("mode") in (CorrectionMode.REVERT, CorrectionMode.REVERT.value)
                and isinstance(data.get("decision_id"), str)
                and isinstance(data.get("requested_by"), str | None)
                and (data.get("requested_by") or "x").strip()):
            return data | {"guidance": default_revert_guidance(
                data["decision_id"], data.get("requested_by"))}
        return data

    @property
    def guidance_defaulted(self) -> bool:
        """True when the guidance is the default a revert without guidance gets."""
        return self.mode is CorrectionMode.REVERT and self.guidance == \
            default_revert_guidance(self.decision_id, self.requested_by)


class CancelRequest(Frozen):
    """Published to `corrections.cancel.<plan_id>`; honoured only from PENDING or ANALYZING."""

    correction_id: Ulid = Field(description="The correction to cancel.")
    plan_id: Ulid = Field(description="Its plan; must match the subject.")
    reason: str | None = Field(default=None, max_length=REASON_MAX_CHARS,
                               description="Why, for the history and the event.")


class FailRequest(Frozen):
    """Published to `corrections.fail.<plan_id>`: an operator ends a correction stuck in
    ANALYZING or EXECUTING as FAILED; refused (`corrections.fail_refused.<plan_id>`) otherwise."""

    correction_id: Ulid = Field(description="The correction to fail.")
    plan_id: Ulid = Field(description="Its plan; must match the subject.")
    reason: NonEmptyStr = Field(
        max_length=REASON_MAX_CHARS,
        description="Why; recorded as the correction's error and in its history.",
        examples=["archive volume lost; retrying will not help"],
    )


class RetryRequest(Frozen):
    """Published to `corrections.retry.<plan_id>`: an operator starts a new round of a FAILED
    correction (FAILED -> PENDING, then a new attempt); refused
    (`corrections.retry_refused.<plan_id>`) otherwise."""

    correction_id: Ulid = Field(description="The correction to retry.")
    plan_id: Ulid = Field(description="Its plan; must match the subject.")
    retry_id: Ulid = Field(
        description="ULID of this retry request; Nats-Msg-Id retry:<correction_id>:<retry_id>. "
        "A retry already recorded with it is not applied twice.",
    )
    reason: str | None = Field(default=None, max_length=REASON_MAX_CHARS,
                               description="Why, for the history and the event.")
    requested_by: NonEmptyStr | None = Field(
        default=None, description="What the sender calls itself (kept in the history's "
        "reason); who asked is the verified principal of the message's signature.")
