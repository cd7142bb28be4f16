"""A comment on a decision: what a person (or an agent) says about it without correcting
it. It changes nothing in the tree; `agents plan explain` and the console show it.

`CommentRequest` travels on `decisions.comment.<plan_id>` (contracts.recording.families);
the worker stores a `Comment`, whose author is the verified principal
(contracts.shared.actor), never a field of the request. The comment_id is the request's
Nats-Msg-Id, so a retried publish stores one comment.
"""

from __future__ import annotations

from pydantic import Field

from contracts.shared.base import Frozen
from contracts.shared.ids import Ulid
from contracts.shared.text import NonEmptyStr
from contracts.shared.timestamps import UtcTime

COMMENT_MAX_CHARS = 4000
COMMENTS_SHOWN = 200
"""Comments read for one decision at most (newest kept when there are more)."""


class CommentRequest(Frozen):
    """Published to `decisions.comment.<plan_id>` (header Nats-Msg-Id: comment_id)."""

    comment_id: Ulid = Field(description="ULID of the comment, made by the sender.")
    plan_id: Ulid = Field(description="The decision's plan; must match the subject.")
    decision_id: Ulid = Field(description="The decision commented on.")
    text: NonEmptyStr = Field(max_length=COMMENT_MAX_CHARS,
                              description=f"The comment, 1 to {COMMENT_MAX_CHARS} characters.",
                              examples=["The cache cluster is shared with billing: ask first."])


class Comment(Frozen):
    """One stored comment (collection `comments`)."""

    comment_id: Ulid
    plan_id: Ulid
    decision_id: Ulid
    text: str
    author: str = Field(description="The verified principal, or 'unverified'.")
    verified: bool = Field(description="Whether the author was verified.")
    created_at: UtcTime = Field(description="When the worker stored it (UTC).")
