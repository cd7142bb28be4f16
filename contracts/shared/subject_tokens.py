"""The plan token of every subject: one rule for the subjects of all three capabilities.

Every subject the ledger uses is `<prefix>.<plan_id>[.<what>]`. The plan ID is
one subject token, so it must be a ULID: a '.', '*' or '>' in it would address other
plans' subjects. Building a subject refuses anything else; a rejection about a message
whose plan cannot be read goes to `<prefix>.unknown`; reading a subject gives back the
token right after the prefix, whatever follows it.
"""

from __future__ import annotations

from contracts.shared.ids import is_ulid

UNKNOWN_PLAN = "unknown"
"""The token of rejections whose plan could not be read."""


def plan_token(plan_id: str) -> str:
    """`plan_id` as a subject token (canonical upper case); ValueError if not a ULID."""
    if not is_ulid(plan_id):
        raise ValueError(f"plan_id {plan_id!r} is not a ULID, so not a safe subject token")
    return plan_id.upper()


def plan_token_or_unknown(plan_id: str | None) -> str:
    """The token of a readable plan ID, else `unknown` (for rejections of hostile input)."""
    return plan_id.upper() if plan_id and is_ulid(plan_id) else UNKNOWN_PLAN


def plan_of(subject: str, prefix: str) -> str | None:
    """The token right after `prefix` in `subject`, or None if it has another shape."""
    head = prefix + "."
    if not subject.startswith(head):
        return None
    token = subject[len(head):].split(".", 1)[0]
    return token or None
