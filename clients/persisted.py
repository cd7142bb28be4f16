"""Waiting until the recorder has written a published decision, or refused it: the
persisted or rejected event, read from the decision's own position in the stream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from nats.js.client import JetStreamContext

from clients._durable import replay_from
from clients.recording_errors import DecisionRejectedError
from contracts.decisions import subjects
from contracts.decisions.model import Decision
from contracts.recording.events import DecisionPersisted, DecisionRejected


class PersistedWaiting:
    """The waiting half of `DecisionRecorder` (clients.recorder)."""

    _js: JetStreamContext
    _published: dict[str, tuple[str, int]]
    """decision_id -> (plan_id, stream sequence of its recorded message): where to start
    reading for its persisted event, so waiting never scans the whole plan."""

    async def wait_persisted(self, decision: Decision,
                             timeout: float = 30.0) -> DecisionPersisted:
        """Wait until the recorder has written `decision`; raise if it rejected it.

        Reads the plan's `decisions.*.<plan_id>` subjects with an ordered consumer from
        the decision's own recorded message on (both outcomes come after it in the
        stream), so an outcome published before this call is not missed. A decision
        this recorder did not publish is looked for from the start of the stream.
        Limit: republishing a decision recorded longer ago than the duplicate window
        (2 minutes) publishes no new event, so waiting for it times out.
        """
        start = self._published.get(decision.decision_id, (decision.plan_id, 0))[1]
        sub = await self._js.subscribe(f"decisions.*.{decision.plan_id}",
                                       ordered_consumer=True, config=replay_from(start))
        try:
            async with asyncio.timeout(timeout):
                while True:
                    msg = await sub.next_msg(timeout=None)
                    outcome = _outcome_for(msg.subject, msg.data, decision.decision_id)
                    if isinstance(outcome, DecisionRejected):
                        raise DecisionRejectedError.of(outcome)
                    if outcome is not None:
                        return outcome
        finally:
            await sub.unsubscribe()

    async def wait_all_persisted(self, decisions: Sequence[Decision],
                                 timeout: float = 30.0) -> list[DecisionPersisted]:
        """`wait_persisted` for each, concurrently; in the order given."""
        async with asyncio.timeout(timeout):
            return list(await asyncio.gather(*(self.wait_persisted(d, timeout)
                                               for d in decisions)))


def _outcome_for(subject: str, data: bytes,
                 decision_id: str) -> DecisionPersisted | DecisionRejected | None:
    """The persisted or rejected event about `decision_id`, or None for anything else."""
    prefix = subject.rsplit(".", 1)[0]
    if prefix not in (subjects.PERSISTED_PREFIX, subjects.REJECTED_PREFIX):
        return None
    if json.loads(data).get("decision_id") != decision_id:
        return None
    if prefix == subjects.PERSISTED_PREFIX:
        return DecisionPersisted.model_validate_json(data)
    return DecisionRejected.model_validate_json(data)
