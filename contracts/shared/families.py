"""What a message family is: one subject pattern, its body, who publishes it, who reads it.

A message family (the decisions agents record, the events the workers announce, an
operator's command, ...) is declared once, in its capability's `families.py`, and
`contracts.families` lists them all. Everything that must agree about a family is
derived from that one declaration, so nothing can be forgotten in one place and kept
in another: the subjects each stream captures (workers.streams), the pullers the
workers run (workers.handlers), the AsyncAPI document (workers.asyncapi) and the NATS
permissions of every role (deploy.permissions).

Who may publish and read a family, and how, is said by its publishers and readers
(contracts.shared.roles). Pure data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel

from contracts.shared.roles import Publisher, Reader, Via, tokens
from contracts.shared.subject_tokens import plan_token

TOKENS: dict[str, str] = {
    "plan_id": "The plan's ULID, upper case ('unknown' in a rejection whose plan could "
               "not be read).",
    "status": "The correction's status after the transition (pending, analyzing, "
              "executing, applied, failed, cancelled).",
    "state": "The attempt's state after the change (pending, executing, complete, failed).",
    "what": "violated or resolved.",
    "webhook_id": "The webhook subscription's ULID.",
    "outcome": "What became of a webhook delivery (delivered, dead_lettered).",
    "change": "What an operator did to a webhook (added, removed).",
    "stream": "The stream a dead letter came from (DECISIONS, CORRECTIONS, INVARIANTS).",
}
"""Every token a subject pattern may hold, with what it carries (the document says it)."""


class Direction(StrEnum):
    INBOUND = "inbound"
    """Sent to the workers: a record, a report, a command, a request."""
    EVENT = "event"
    """Announced by the workers."""


@dataclass(frozen=True, slots=True)
class Stream:
    name: str
    namespace: str
    """The first subject token of its families (`decisions` for `decisions.recorded...`)."""
    duplicate_window: float
    description: str


@dataclass(frozen=True, slots=True)
class MessageFamily:
    subject: str
    """The pattern, literal tokens then `{token}`s: `decisions.recorded.{plan_id}`."""
    body: type[BaseModel]
    direction: Direction
    stream: Stream | None
    """None: core request-reply, captured by no stream (a stream would answer the
    requester with a PubAck)."""
    msg_id: str | None
    """The Nats-Msg-Id rule, in words (None: core NATS, no duplicate window)."""
    description: str
    publishers: tuple[Publisher, ...]
    readers: tuple[Reader, ...]
    replies: tuple[type[BaseModel], ...] = ()
    """The bodies a request is answered with (request-reply only)."""
    event_type: str | None = None
    """An event's CloudEvents type stem, `{token}`s allowed (`correction.{status}`):
    contracts.shared.cloudevents makes `io.decision-ledger.<stem>.v<version>` of it.
    None: the family's name (a new event family gets a type without saying one)."""
    about: str = "plan/{plan_id}"
    """An event's CloudEvents subject: subject tokens, else body fields (dotted for a
    nested one), e.g. `plan/{plan_id}/correction/{correction_id}`."""
    version: int = 1
    """The body's schema version: in the CloudEvents type and its dataschema. Raised
    when a change would break a reader of the previous body."""

    def __post_init__(self) -> None:
        unknown = [t for t in self.tokens if t not in TOKENS]
        if unknown or not self.tokens:
            raise ValueError(f"{self.subject}: tokens {unknown or 'none'} (known: {list(TOKENS)})")
        if self.stream is not None and not self.subject.startswith(self.stream.namespace + "."):
            raise ValueError(f"{self.subject} is outside stream {self.stream.name}'s namespace")
        if self.stream is None and (not self.replies or any(
                r.via is not Via.RESPONDER for r in self.readers)):
            raise ValueError(f"{self.subject}: a family outside the streams is request-reply")
        for p in self.publishers:
            if p.subject is not None and not _narrows(p.subject, self.subject):
                raise ValueError(f"{p.subject} does not narrow {self.subject}")
        if self.partitioned is not None and (self.tokens != ["plan_id"] or self.stream is None
                                             or len(self.worker_consumers()) != 1):
            raise ValueError(f"{self.subject}: a partitioned family is stored in a stream, "
                             "has the plan as its one token and one worker durable")

    @property
    def name(self) -> str:
        """The literal part (`decisions.recorded`): the family's name and subject prefix."""
        return self.subject.split(".{", 1)[0]

    @property
    def tokens(self) -> list[str]:
        return tokens(self.subject)

    @property
    def wildcard(self) -> str:
        """Every subject of the family, one `*` per token: `decisions.recorded.*`."""
        return wildcard(self.subject)

    @property
    def everything(self) -> str:
        """Everything under the family's name (`decisions.recorded.>`): what a reader may
        subscribe to, however it spells its filter."""
        return f"{self.name}.>"

    def subject_for(self, plan_id: str, **tokens: str) -> str:
        """A concrete subject; ValueError for a plan_id that is not a ULID."""
        return self.subject.format(plan_id=plan_token(plan_id), **tokens)

    def worker_consumers(self) -> list[Reader]:
        return [r for r in self.readers if r.consumer is not None]

    @property
    def partitioned(self) -> str | None:
        """The setting naming its partition count, if its worker durable is partitioned
        (contracts.shared.partitions): the stream then stores it by partition."""
        return next((r.consumer.partitions for r in self.readers
                     if r.consumer is not None and r.consumer.partitions), None)


def wildcard(pattern: str) -> str:
    """`{token}`s as `*`: `invariants.events.{plan_id}.resolved` becomes
    `invariants.events.*.resolved`."""
    return pattern.format(**{t: "*" for t in tokens(pattern)})


def _narrows(narrow: str, pattern: str) -> bool:
    """Each token of `narrow` equals `pattern`'s or fills one of its `{token}`s."""
    a, b = narrow.split("."), pattern.split(".")
    return len(a) == len(b) and all(x == y or y.startswith("{") for x, y in zip(a, b, strict=True))


def stream_subjects(stream: Stream, families: tuple[MessageFamily, ...]) -> list[str]:
    """What `stream` captures: its whole namespace (`decisions.>`) when every family
    under it is the stream's, else each of its families' subjects (so a request-reply
    family in the namespace stays uncaptured: a stream would answer it with a PubAck)."""
    under = [f for f in families if f.name.split(".", 1)[0] == stream.namespace]
    if all(f.stream == stream for f in under):
        return [f"{stream.namespace}.>"]
    return [f.wildcard for f in under if f.stream == stream]


def partitioned_in(stream: Stream, families: tuple[MessageFamily, ...]) -> MessageFamily | None:
    """The family `stream` stores by partition, if any: a stream has one subject
    transform, so at most one of its families may be partitioned."""
    found = [f for f in families if f.stream == stream and f.partitioned is not None]
    if len(found) > 1:
        raise ValueError(f"stream {stream.name}: {len(found)} partitioned families; one "
                         "transform per stream allows one")
    return found[0] if found else None
