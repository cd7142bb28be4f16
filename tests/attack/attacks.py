"""Attacks on the ledger's NATS, tried one at a time as one principal, and the tally the
suite prints at its end.

An attack refused by nats-server gets a `-ERR 'Permissions Violation ...'` naming its
subject (nats-py hands it to `error_cb`) and, for a request, no answer. A publish is
sent with a reply subject in the attacker's own inbox, so an answer would show that it
got through. Each attack waits for the refusal naming its own subject, so a late one
cannot be counted for the next.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal

from nats.aio.client import Client

REFUSAL_WAIT = 5.0
"""Seconds to wait for the server's -ERR after a forbidden operation."""
ANSWER_GRACE = 0.05
"""Seconds an allowed request would have taken to be answered, after the flush."""


@dataclass(frozen=True)
class Attack:
    what: str
    subject: str
    op: Literal["pub", "sub"] = "pub"
    body: bytes = b""
    queue: str = ""


@dataclass
class Tally:
    """Every attack tried in the session, and how each ended."""

    tried: int = 0
    by_server: int = 0
    by_readers: int = 0
    not_refused: list[str] = field(default_factory=list)

    def note(self, who: str, what: str, refused: bool, *, by: str = "server") -> None:
        self.tried += 1
        if not refused:
            self.not_refused.append(f"{who}: {what}")
        elif by == "server":
            self.by_server += 1
        else:
            self.by_readers += 1

    def line(self) -> str:
        refused = self.by_server + self.by_readers
        return (f"attacks tried: {self.tried}, refused: {refused} (by nats-server: "
                f"{self.by_server}, by the ledger's readers: {self.by_readers}); not "
                f"refused: {len(self.not_refused)}")


TALLY = Tally()


class Attacker:
    """One principal's connection; `errors` are the server's -ERRs it got."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.nc: Client | None = None
        self.errors: list[str] = []
        self._seen = asyncio.Event()

    async def on_error(self, exc: Exception) -> None:
        self.errors.append(str(exc).lower())
        self._seen.set()

    def _refusal_of(self, subject: str) -> str | None:
        needle = f'"{subject.lower()}"'
        return next((e for e in self.errors if "permissions violation" in e and needle in e),
                    None)

    async def refused(self, attack: Attack) -> bool:
        """Try `attack`; True when the server refused it (and nothing answered)."""
        assert self.nc is not None
        nc = self.nc
        self.errors.clear()
        self._seen.clear()
        answers = None
        if attack.op == "pub":
            reply = nc.new_inbox()
            answers = await nc.subscribe(reply)
            await nc.publish(attack.subject, attack.body, reply=reply)
        else:
            sub = await nc.subscribe(attack.subject, queue=attack.queue)
        await nc.flush(timeout=REFUSAL_WAIT)
        refused = await self._refusal_within(attack.subject, REFUSAL_WAIT)
        if answers is not None:
            await asyncio.sleep(ANSWER_GRACE)
            refused = refused and answers.pending_msgs == 0
            await answers.unsubscribe()
        else:
            await sub.unsubscribe()
        return refused

    async def _refusal_within(self, subject: str, seconds: float) -> bool:
        deadline = asyncio.get_running_loop().time() + seconds
        while True:
            self._seen.clear()
            if self._refusal_of(subject) is not None:
                return True
            left = deadline - asyncio.get_running_loop().time()
            try:
                await asyncio.wait_for(self._seen.wait(), max(left, 0))
            except TimeoutError:
                return self._refusal_of(subject) is not None

    async def tried_all(self, attacks: list[Attack]) -> list[str]:
        """Try each; the ones not refused (also counted in the session's tally)."""
        failed = []
        for attack in attacks:
            try:
                refused = await self.refused(attack)
            except TimeoutError:
                refused = False
            TALLY.note(self.name, attack.what, refused)
            if not refused:
                failed.append(f"{attack.what} ({attack.op} {attack.subject})")
        return failed
