"""The runtime's side of the resume contract: "resume me" as one call.

    async def resume(instruction: ResumeInstruction) -> None:
        ...  # go back to instruction.target.actor_state_ref, with instruction.guidance,
             # and record what follows under instruction.resume_at

    async with await recorder.on_resume(resume, plan_id=plan) as sub:
        ...  # the agent runs; instructions arrive in the background

Each applied correction publishes one ResumeInstruction to `corrections.resume.<plan_id>`
(contracts/corrections/resume.py). A runtime reads its plans' instructions through a
durable consumer, so one published while it was down is delivered when it comes back.
An instruction is acknowledged only after the callback returned: a runtime that crashes
mid-resume gets it again, so a callback should be idempotent (the instruction's
`correction_id` names it).
A callback that raises gets the instruction back after a backoff, at most `max_deliver`
times, then an ERROR is logged and the server gives up on it. While a callback runs, the
instruction is kept from being redelivered elsewhere by in-progress acknowledgements.

Whose durable: under per-principal permissions a runtime owns `resume_<principal>` (its
principal is named by its connection's inbox prefix, clients.inbox) and the names it
declares in the principals file, and no one else may touch them. A durable reads one
filter: one plan's subject, or every plan's (`corrections.resume.*`) when following
several, of which this subscription hands over only its own plans' (the others are
acknowledged and skipped: a durable serves one subscription). Without a principal
(development, no authorization) the durable of one plan is `resume-<plan_id>`.
Only what the durable delivers on its subjects is read (clients._feed_guard), and an
instruction whose body names another plan than its subject is terminated, never handed
over.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Self

from nats.aio.client import Client
from nats.aio.msg import Msg

from clients._durable import (
    BACKOFF,
    MAX_DELIVER,
    DurablePull,
    DurableSpec,
    bounded,
    settle_quietly,
)
from clients.inbox import principal_of_connection
from contracts.corrections import subjects
from contracts.corrections.resume import ResumeInstruction
from contracts.shared.ids import is_ulid
from contracts.shared.subject_tokens import plan_of

__all__ = ["ResumeCallback", "ResumeSubscription", "parse_instruction", "resume_durable"]

log = logging.getLogger(__name__)

ResumeCallback = Callable[[ResumeInstruction], Awaitable[None]]

STOP_TIMEOUT = 10.0
"""Seconds `stop` waits for the callback in hand to be cancelled, and for closing."""


def parse_instruction(msg: Msg | bytes) -> ResumeInstruction:
    """A `corrections.resume.*` message as its model; pydantic's ValidationError if not one."""
    data = msg if isinstance(msg, bytes) else msg.data
    return ResumeInstruction.model_validate_json(data)


def resume_durable(plan_id: str | None, principal: str | None = None) -> str:
    """The default durable: the principal's own (`resume_<principal>`), else, with no
    principal (development), one per plan (`resume-<plan_id>`)."""
    if principal:
        return f"resume_{principal}"
    if plan_id is None:
        raise ValueError("name a durable when following all plans or several")
    return f"resume-{plan_id.upper()}"


def _filter(plan_ids: Sequence[str]) -> str:
    return subjects.resume(plan_ids[0]) if len(plan_ids) == 1 else subjects.ALL_RESUMES


class ResumeSubscription:
    """A background task handing each resume instruction to a callback; see the module doc.

    `handled` counts the instructions whose callback returned (and that were acked).
    """

    def __init__(self, nc: Client, callback: ResumeCallback, *,
                 plan_ids: Sequence[str] = (), durable: str | None = None,
                 ack_wait: float = 30.0, from_start: bool | None = None,
                 max_deliver: int = MAX_DELIVER, backoff: Sequence[float] = BACKOFF,
                 poll_timeout: float = 5.0) -> None:
        for plan_id in plan_ids:
            if not is_ulid(plan_id):
                raise ValueError(f"plan_id {plan_id!r} is not a ULID")
        plans = sorted({p.upper() for p in plan_ids})
        if durable is None:
            principal = principal_of_connection(nc)
            if principal is None and len(plans) != 1:
                raise ValueError("name a durable when following all plans or several")
            durable = resume_durable(plans[0] if len(plans) == 1 else None, principal)
        self._plans = frozenset(plans)
        """The plans handed over (empty: all)."""
        # A plan's durable is created when its runtime starts (before any correction), so
        # reading from the start misses nothing and costs nothing; a durable over all
        # plans starts with what comes next unless asked otherwise.
        self._pull = DurablePull(nc, DurableSpec(
            stream=subjects.CORRECTIONS_STREAM, durable=durable, filter_subject=_filter(plans),
            ack_wait=ack_wait, max_deliver=max_deliver, backoff=backoff,
            from_start=bool(plan_ids) if from_start is None else from_start))
        self._callback = callback
        self._poll = poll_timeout
        self._task: asyncio.Task[None] | None = None
        self.handled = 0

    @property
    def durable(self) -> str:
        return self._pull.spec.durable

    async def start(self) -> Self:
        """Create (or reuse) the durable, then hand instructions over in the background."""
        if self._task is None:
            await self._pull.open()
            self._task = asyncio.create_task(self._run(), name=f"resume:{self.durable}")
        return self

    async def stop(self, *, delete: bool = False) -> None:
        """Stop after the callback in hand (if any) is cancelled; it is redelivered later.
        `delete` also removes the durable: do that when the plan is done for good."""
        if self._task is not None:
            self._pull.closing = True
            self._task.cancel()
            try:
                # Bounded: a callback that ignores cancellation must not hang the caller.
                await asyncio.wait_for(asyncio.shield(self._task), STOP_TIMEOUT)
            except (asyncio.CancelledError, TimeoutError):
                if not self._task.done():
                    log.warning("resume subscription %s did not stop within %.0f s; left "
                                "to finish on its own", self.durable, STOP_TIMEOUT)
            except Exception as exc:  # the task's own failure: stopping anyway
                log.warning("resume subscription %s ended with %s", self.durable,
                            bounded(exc))
            self._task = None
        await asyncio.wait_for(self._pull.close(delete=delete), STOP_TIMEOUT)
        self._pull.closing = False

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    async def _run(self) -> None:
        while True:
            msg = await self._pull.next(self._poll)
            try:
                instruction = parse_instruction(msg)
                token = plan_of(msg.subject, subjects.RESUME_PREFIX) or ""
                if token.upper() != instruction.plan_id.upper():
                    raise ValueError(f"its body names plan {instruction.plan_id}")
            except Exception as exc:
                # Not an instruction this library can read, or not for the plan its
                # subject names: retrying cannot help, and it must not hold back the ones
                # behind it.
                log.error("terminating unreadable resume instruction on %s: %s",
                          msg.subject, bounded(exc))
                await settle_quietly(msg.term())
                continue
            if self._plans and instruction.plan_id.upper() not in self._plans:
                await settle_quietly(msg.ack())  # another plan's, on a durable over all
                continue
            await self._deliver(msg, instruction)

    async def _deliver(self, msg: Msg, instruction: ResumeInstruction) -> None:
        keepalive = asyncio.create_task(self._in_progress(msg))
        try:
            await self._callback(instruction)
        except asyncio.CancelledError:
            await settle_quietly(msg.nak())
            raise
        except Exception as exc:
            delay = self._pull.spec.delay(msg)
            log.warning("resume callback failed for correction %s (again in %.0f s): %s",
                        instruction.correction_id, delay, bounded(exc))
            await settle_quietly(msg.nak(delay=delay))
            return
        finally:
            keepalive.cancel()
        await msg.ack_sync()
        self.handled += 1

    async def _in_progress(self, msg: Msg) -> None:
        """Tell the server the callback is still working, so a long resume (re-running a
        graph) is not redelivered to another replica halfway through."""
        while True:
            await asyncio.sleep(max(self._pull.spec.ack_wait / 3, 0.5))
            await settle_quietly(msg.in_progress())
