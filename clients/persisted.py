"""Waiting until the recorder has written a published decision, or refused it: the
persisted or rejected event, read from the decision's own position in the stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from nats.aio.client import Client

from clients._replay import StreamReplay
from clients.recording_errors import DecisionRejectedError
from contracts.corrections.resume_points import DecisionRef
from contracts.decisions import subjects
from contracts.decisions.model import Decision
from contracts.recording.events import DecisionPersisted, DecisionRejected

Outcome = DecisionPersisted | DecisionRejected


class PersistedWaiting:
    """The waiting half of `DecisionRecorder` (clients.recorder)."""

    _nc: Client
    _published: dict[str, tuple[str, int]]
    """decision_id -> (plan_id, stream sequence of its recorded message): where to start
    reading for its persisted event, so waiting never scans the whole plan."""

    async def wait_persisted(self, decision: Decision,
                             timeout: float = 30.0) -> DecisionPersisted:
        """Wait until the recorder has written `decision`; raise if it rejected it.

        Reads the plan's `decisions.*.<plan_id>` subjects from the decision's own
        recorded message on (both outcomes come after it in the stream), so an outcome
        published before this call is not missed. A decision this recorder did not
        publish is looked for from the start of the stream.
        Limit: republishing a decision recorded longer ago than the duplicate window
        (2 minutes) publishes no new event, so waiting for it times out.
        """
        return (await self.wait_all_persisted([decision], timeout))[0]

    async def held_as(self, decision: DecisionRef, timeout: float = 30.0
                      ) -> DecisionPersisted:
        """`wait_persisted` for anything naming a decision and its plan (its hold, if
        any, is on the event)."""
        plan = decision.plan_id.upper()
        async with asyncio.timeout(timeout):
            found = await self._outcomes(plan, {decision.decision_id})
        return found[decision.decision_id]

    async def wait_all_persisted(self, decisions: Sequence[Decision],
                                 timeout: float = 30.0) -> list[DecisionPersisted]:
        """`wait_persisted` for each, one read of each plan's subjects for all of its
        decisions; in the order given. The first rejection found is raised."""
        plans: dict[str, set[str]] = {}
        for d in decisions:
            plans.setdefault(d.plan_id.upper(), set()).add(d.decision_id)
        async with asyncio.timeout(timeout):
            found = await asyncio.gather(*(self._outcomes(plan, ids)
                                           for plan, ids in plans.items()))
        outcomes = {k: v for part in found for k, v in part.items()}
        return [outcomes[d.decision_id] for d in decisions]

    async def _outcomes(self, plan: str, wanted: set[str]) -> dict[str, DecisionPersisted]:
        start = min(self._published.get(d, (plan, 0))[1] for d in wanted)
        out: dict[str, DecisionPersisted] = {}
        wake = [f"{subjects.PERSISTED_PREFIX}.{plan}", f"{subjects.REJECTED_PREFIX}.{plan}"]
        async with StreamReplay(self._nc, subjects.DECISIONS_STREAM, f"decisions.*.{plan}",
                                start, wake) as replay:
            while len(out) < len(wanted):
                msg = await replay.next()
                outcome = _outcome_for(msg.subject or "", msg.data or b"", wanted)
                if isinstance(outcome, DecisionRejected):
                    raise DecisionRejectedError.of(outcome)
                if outcome is not None:
                    out[outcome.decision_id] = outcome
        return out


def _outcome_for(subject: str, data: bytes, wanted: set[str]) -> Outcome | None:
    """The persisted or rejected event about one of `wanted`, or None for anything else
    (another decision's, a recorded decision, a body that is no event)."""
    prefix = subject.rsplit(".", 1)[0]
    if prefix not in (subjects.PERSISTED_PREFIX, subjects.REJECTED_PREFIX):
        return None
    try:
        if json.loads(data).get("decision_id") not in wanted:
            return None
        if prefix == subjects.PERSISTED_PREFIX:
            return DecisionPersisted.model_validate_json(data)
        return DecisionRejected.model_validate_json(data)
    except Exception:  # not an event this library can read: it is no outcome
        return None
