"""Why a published decision was not recorded: the recorder's rejection, typed, and the
stale branch a correction removed (with where to go on)."""

from __future__ import annotations

from contracts.corrections.resume_points import ResumePoint
from contracts.recording.events import DecisionRejected
from contracts.shared.ids import is_ulid
from contracts.shared.rules import Rule


class DecisionRejectedError(Exception):
    """The recorder refused a published decision; `rejection.errors` names every rule."""

    def __init__(self, rejection: DecisionRejected) -> None:
        self.rejection = rejection
        super().__init__(f"decision {rejection.decision_id} rejected: "
                         + "; ".join(str(e) for e in rejection.errors))

    @staticmethod
    def of(rejection: DecisionRejected) -> DecisionRejectedError:
        """StaleBranchError when a correction made the decision stale, else this."""
        stale = {Rule.PARENT_SUPERSEDED, Rule.PLAN_ROLLED_BACK}
        if any(e.rule in stale for e in rejection.errors):
            return StaleBranchError(rejection)
        return DecisionRejectedError(rejection)


class StaleBranchError(DecisionRejectedError):
    """The decision was recorded on a branch a correction removed (its parent superseded,
    or its plan rolled back). `resume_at` is where the runtime goes on (pass it as the next
    decision's `parent`), `correction_id` the correction that removed the branch; the
    resume instruction of that correction (`on_resume`) says the same and more."""

    def __init__(self, rejection: DecisionRejected) -> None:
        super().__init__(rejection)
        r = rejection.resume
        self.correction_id: str | None = r.correction_id if r else None
        self.resume_at: ResumePoint | None = None
        if r and r.plan_id and r.replacement_decision_id \
                and is_ulid(r.plan_id) and is_ulid(r.replacement_decision_id):
            self.resume_at = ResumePoint(plan_id=r.plan_id,
                                         decision_id=r.replacement_decision_id)
