"""An operator's cancel, fail or retry, and the ledger's answer to it: the command's
outcome on the correction's events, or its refusal."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

from nats.aio.msg import Msg

from clients.operator import CorrectionClient
from contracts.corrections import subjects
from contracts.corrections.states import CorrectionStatus

REFUSED_SUBJECT = {"cancel": subjects.cancel_refused, "fail": subjects.fail_refused,
                   "retry": subjects.retry_refused}
"""Where the ledger says no to each operator command."""


async def command_answer(ops: CorrectionClient, correction_id: str, plan_id: str, *,
                         verb: str, done: CorrectionStatus,
                         send: Callable[[], Awaitable[object]],
                         timeout: float) -> dict[str, object]:
    """Send a cancel, fail or retry (`send`), then wait for the ledger's answer: `done` on
    the correction's events, or its refusal on `corrections.<verb>_refused.<plan_id>`.

    Returns {"correction_id", "status": done | "refused" | None (no answer in time),
    "message"}. The `agents` CLI and the web console both call it."""
    nc = ops.connection
    answer: asyncio.Future[dict[str, object]] = asyncio.get_running_loop().create_future()
    done_subject = subjects.event(plan_id, done)
    refused_subject = REFUSED_SUBJECT[verb](plan_id)

    async def on_msg(msg: Msg) -> None:
        try:
            data = json.loads(msg.data)
        except ValueError:  # not ours to judge; the ledger's own messages are JSON
            return
        if not isinstance(data, dict) or data.get("correction_id") != correction_id \
                or answer.done():
            return
        if msg.subject == refused_subject:
            answer.set_result({"correction_id": correction_id, "status": "refused",
                               "message": f"{verb} refused: {data.get('reason')}"})
        else:
            answer.set_result({"correction_id": correction_id, "status": done.value,
                               "message": data.get("reason")})

    # Core subscriptions, opened before the command is sent: both subjects are also
    # captured by the CORRECTIONS stream, but a live answer is all a command needs.
    subs = [await nc.subscribe(done_subject, cb=on_msg),
            await nc.subscribe(refused_subject, cb=on_msg)]
    try:
        await send()
        try:
            return await asyncio.wait_for(answer, timeout)
        except TimeoutError:
            return {"correction_id": correction_id, "status": None,
                    "message": f"{verb} published, but the ledger did not answer within "
                               f"{timeout:g}s (agents correction show {correction_id})"}
    finally:
        for s in subs:
            await s.unsubscribe()
