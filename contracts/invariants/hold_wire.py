"""The judge's settlement on the wire: `decisions.hold.<plan_id>.released | refused`.

A hold the judge moves to `awaiting_approval` is announced by its approval's
`requested` event, and a hold a person's verdict (or the approval's expiry) moves is
announced by the approval's decided event (contracts.invariants.approval_wire). What
is left is the judge's own release or refusal: without this event an agent waiting at
its gate would learn it only from its timeout.
"""

from __future__ import annotations

from contracts.invariants import subjects
from contracts.invariants.holds import Hold, HoldStatus
from contracts.shared.base import Frozen

ANNOUNCED = frozenset({HoldStatus.RELEASED, HoldStatus.REFUSED})
"""The judge's settlements this family announces (the others have approval events)."""


class HoldEvent(Frozen):
    """hold.released / hold.refused, with the hold as the judge left it (its reasons say
    which invariants were broken; `digest` is the content the judge ruled on)."""

    event_type: HoldStatus
    hold: Hold

    @property
    def subject(self) -> str:
        return subjects.hold_event(self.hold.plan_id, self.event_type.value)

    @property
    def msg_id(self) -> str:
        return subjects.hold_msg_id(self.hold.decision_id, self.event_type.value)


def outbox_key(decision_id: str) -> str:
    """The outbox key of a judge's settlement event."""
    return f"hold:{decision_id}"
