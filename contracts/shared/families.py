"""What a message family is: one subject pattern, its body, who publishes it, who reads it.

A message family (the decisions agents record, the events the workers announce, an
operator's command, ...) is declared once, in its capability's `families.py`, and
`contracts.families` lists them all. Everything that must agree about a family is
derived from that one declaration, so nothing can be forgotten in one place and kept
in another: the subjects each stream captures (workers.streams), the pullers the
workers run (workers.handlers), the AsyncAPI document (workers.asyncapi) and the NATS
permissions of every role (deploy.permissions).

Roles are what nats-server enforces today (one user per role). Each reader says how
it reads (its own durable consumer, an ordered consumer, a core subscription, or as
the responder of a request) and, for a durable, the consumer's name: a fixed name
(the workers' `recorder`), or a pattern whose tokens are filled by the reader. A
`{principal}` token is known when permissions are written, so a permission can name
that principal's consumers alone; any other token (`{plan_id}`, `{name}`) is chosen at
run time, so the permission can only say "any name" (`*`). Pure data: no I/O.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel

from contracts.shared.subject_tokens import plan_token

PRINCIPAL = "principal"
"""The durable-name token a permission can fill in: the reader's own principal."""
TOKENS: dict[str, str] = {
    "plan_id": "The plan's ULID, upper case ('unknown' in a rejection whose plan could "
               "not be read).",
    "status": "The correction's status after the transition (pending, analyzing, "
              "executing, applied, failed, cancelled).",
    "state": "The attempt's state after the change (pending, executing, complete, failed).",
    "what": "violated or resolved.",
}
"""Every token a subject pattern may hold, with what it carries (the document says it)."""


class Role(StrEnum):
    """Who connects to NATS; nats-server gives each role its own permissions."""

    WORKER = "worker"
    """Trusted: runs the consumers, publishes the events, manages the streams."""
    AGENT = "agent"
    """Semi-trusted: records decisions, reports violations, follows its plans."""
    OPERATOR = "operator"
    """Trusted within its scope: corrects plans, inspects the streams."""
    SUBSCRIBER = "subscriber"
    """Reads outcomes, nothing else."""


class Direction(StrEnum):
    INBOUND = "inbound"
    """Sent to the workers: a record, a report, a command, a request."""
    EVENT = "event"
    """Announced by the workers."""


class Via(StrEnum):
    """How a reader reads a family."""

    DURABLE = "durable"
    """A durable pull consumer the reader owns: it creates, reads, acks and deletes it."""
    ORDERED = "ordered"
    """An ephemeral ordered consumer (a replay, then what follows), gone when done."""
    CORE = "core"
    """A core subscription: what is published while it listens, no acknowledgement."""
    RESPONDER = "responder"
    """A core subscription in a queue group answering each request (request-reply)."""


class Deliver(StrEnum):
    ALL = "all"
    """From the first message the stream holds."""
    NEW = "new"
    """From the messages published after the consumer is created."""


Setting = str | float
"""A consumer value: a `str` names a worker setting (workers.settings.Settings), a
number is the value itself."""


@dataclass(frozen=True, slots=True)
class ConsumerSpec:
    """How the workers configure and pull one of their durable consumers."""

    ack_wait: Setting
    batch_size: Setting
    max_wait: Setting = 1.0
    """Seconds an idle pull waits for a first message."""
    max_ack_pending: int = 1000
    pending_batches: int = 0
    """max_ack_pending is at least this many full batches (0: no such floor)."""
    deliver: Deliver = Deliver.ALL
    waits: str | None = None
    """Deliveries that are waits, not failures, and what they wait for: the handler
    counts them (`extra_deliveries`) on top of CONSUMER_MAX_DELIVER. None: MaxDeliver
    and the backoff are CONSUMER_MAX_DELIVER and CONSUMER_BACKOFF alone."""
    backoff_after_ack_wait: bool = True
    """False: a message whose worker died comes back after the ack wait every time,
    not after the consumer's BackOff at its delivery count."""
    one_replica: bool = False
    """Pulled only by the replica holding this consumer's lease (workers.leading)."""


@dataclass(frozen=True, slots=True)
class Publisher:
    role: Role
    used_by: str
    """What publishes it (a client call, a command, a worker)."""
    subject: str | None = None
    """A narrower pattern than the family's (a literal in place of a token), if any."""


@dataclass(frozen=True, slots=True)
class Reader:
    role: Role
    via: Via
    used_by: str
    durable: str | None = None
    """Via.DURABLE: the consumer's name, or its pattern (module doc)."""
    queue: str | None = None
    """Via.RESPONDER: the queue group, so one worker answers each request."""
    consumer: ConsumerSpec | None = None
    """The workers' own durables: how they are configured and pulled."""

    def __post_init__(self) -> None:
        if (self.via is Via.DURABLE) != (self.durable is not None):
            raise ValueError("a durable reader, and only one, names its durable")
        if self.consumer is not None and (self.role is not Role.WORKER
                                          or self.via is not Via.DURABLE):
            raise ValueError("only the workers' durables carry a consumer spec")
        if self.via is Via.RESPONDER and not self.queue:
            raise ValueError("a responder answers in a queue group")

    @property
    def fixed_durable(self) -> bool:
        """The durable has one name, known now (no token in it)."""
        return self.durable is not None and not _tokens(self.durable)


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

    def __post_init__(self) -> None:
        unknown = [t for t in self.tokens if t not in TOKENS]
        if unknown or not self.tokens:
            raise ValueError(f"{self.subject}: tokens {unknown or 'none'} (known: {TOKENS})")
        if self.stream is not None and not self.subject.startswith(self.stream.namespace + "."):
            raise ValueError(f"{self.subject} is outside stream {self.stream.name}'s namespace")
        if self.stream is None and (not self.replies or any(
                r.via is not Via.RESPONDER for r in self.readers)):
            raise ValueError(f"{self.subject}: a family outside the streams is request-reply")
        for p in self.publishers:
            if p.subject is not None and not _narrows(p.subject, self.subject):
                raise ValueError(f"{p.subject} does not narrow {self.subject}")

    @property
    def name(self) -> str:
        """The literal part (`decisions.recorded`): the family's name and subject prefix."""
        return self.subject.split(".{", 1)[0]

    @property
    def tokens(self) -> list[str]:
        return _tokens(self.subject)

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


def _tokens(pattern: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(pattern) if name]


def wildcard(pattern: str) -> str:
    """`{token}`s as `*`: `invariants.events.{plan_id}.resolved` becomes
    `invariants.events.*.resolved`."""
    return pattern.format(**{t: "*" for t in _tokens(pattern)})


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
