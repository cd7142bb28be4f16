"""What the recorder answers for each message (ack, term, nak after a delay), and how long
a decision may wait for its parent: the policy and the clock that measures the wait."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Protocol

from contracts.decisions.subjects import DECISIONS_STREAM
from contracts.redaction.rules import Rules
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.dead_letter import dead_letter_id


class Verdict(StrEnum):
    ACK = "ack"    # stored (or already stored): done
    TERM = "term"  # rejected and dead-lettered: never redeliver
    NAK = "nak"    # parent not stored yet: redeliver after `delay`


@dataclass(frozen=True, slots=True)
class Disposition:
    verdict: Verdict
    delay: float = 0.0


@dataclass(frozen=True)
class RecorderPolicy:
    parent_wait_seconds: float = 60.0
    """How long a decision may wait for its parent before it is dead-lettered."""
    min_backoff_seconds: float = 0.25
    max_backoff_seconds: float = 5.0
    wait_gap_max_seconds: float = 10.0
    """The most one gap between two sightings of a waiting decision adds to its wait.
    The recorder sees a waiting decision again after its backoff (at most
    max_backoff_seconds) plus the time its batch takes; a longer gap is time nobody was
    looking (a database outage failing its batches, no recorder running, a hand-over)
    or the clock stepping forward, and counts as this much, so none of those
    dead-letters a decision whose parent is on its way. At least max_backoff_seconds,
    so a wait takes no more deliveries than `deliveries_to_wait` counts."""
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    """A larger message is dead-lettered unread (payload_too_large)."""
    created_at_max_skew_seconds: float | None = 300.0
    """How far a sent created_at may be from the stream's time (created_at_skew);
    None: not checked."""
    redaction: Rules = field(default_factory=Rules)
    """What is redacted from a decision's free text before it is stored
    (contracts.redaction; default: every built-in detector)."""

    def __post_init__(self) -> None:
        if self.wait_gap_max_seconds < self.max_backoff_seconds:
            raise ValueError("wait_gap_max_seconds must be at least max_backoff_seconds")

    @property
    def created_at_max_skew(self) -> timedelta | None:
        s = self.created_at_max_skew_seconds
        return None if s is None else timedelta(seconds=s)

    def backoff(self, waited: float) -> float:
        """About as long again as it has waited: 0.25 s, 0.25 s, 0.5 s, 1 s, 2 s, ...
        capped; quick when the parent is merely behind."""
        return float(min(self.max_backoff_seconds, max(self.min_backoff_seconds, waited)))

    def deliveries_to_wait(self) -> int:
        """How many deliveries the whole parent wait takes at most (each nak is one); the
        recorder's MaxDeliver adds this to the deliveries allowed for failures."""
        waited, n = 0.0, 1
        while waited < self.parent_wait_seconds:
            waited += self.backoff(waited)
            n += 1
        return n


class ParentWaitClock(Protocol):
    async def waited(self, keys: Iterable[str], gap_max: float) -> dict[str, float]:
        """Seconds each message has waited for its parent (0 for the new ones): the sum
        of the gaps between its sightings, each counted as at most `gap_max` (a longer
        one was an outage, a hand-over or a clock step, not waiting), by the wait
        store's own clock: the database server's for the MongoDB store (ADR 0027), so a
        recorder taking over from another whose clock disagrees counts the same wait."""
        ...


class MemoryWaits:
    """The wait clock of one process, for tests and tools without a database clock.
    `clock`: seconds, monotonic unless a test steps it."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: dict[str, tuple[float, float]] = {}
        """By key: (seconds waited, when last seen)."""

    async def waited(self, keys: Iterable[str], gap_max: float) -> dict[str, float]:
        now = self._clock()
        out: dict[str, float] = {}
        for k in dict.fromkeys(keys):
            waited, seen = self._seen.get(k, (0.0, now))
            out[k] = waited + min(gap_max, max(0.0, now - seen))
            self._seen[k] = (out[k], now)
        return out


def wait_key(stream_sequence: int) -> str:
    return dead_letter_id(DECISIONS_STREAM, stream_sequence)
