"""Who may publish a message family and who may read it, and how (contracts.shared.families).

nats-server enforces it per user: one user per principal of the principals file (or one
per role, for password users). Each reader says how it reads (its own durable consumer,
a replay of the stream by sequence, a core subscription, or as the responder of a
request) and, for a durable, the consumer's name: a fixed name (the workers'
`recorder`), or a pattern naming whose it is. NATS permissions match whole subject
tokens, never parts of one, so a consumer can only be owned by its exact name, written
when the permissions are: `{principal}` is the reading principal's name
(`resume_{principal}`), `{consumer}` any name the principal declares it owns (its
`consumers` in the principals file). Pure data: no I/O.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from enum import StrEnum

PRINCIPAL = "principal"
"""The durable-name token filled in with the reading principal's name."""
CONSUMER = "consumer"
"""The durable-name token standing for each name the principal declares it owns."""
NAME_TOKENS = (PRINCIPAL, CONSUMER)


class Role(StrEnum):
    """Who connects to NATS; nats-server gives each role its own permissions."""

    WORKER = "worker"
    AGENT = "agent"
    OPERATOR = "operator"
    SUBSCRIBER = "subscriber"


ROLE_DOCS: dict[Role, str] = {
    Role.WORKER: "trusted: runs the consumers, publishes the events, manages the streams",
    Role.AGENT: "semi-trusted: records decisions, reports violations, follows its plans",
    Role.OPERATOR: "trusted within its scope: corrects plans, inspects the streams",
    Role.SUBSCRIBER: "reads outcomes, nothing else",
}


class Grant(StrEnum):
    """What a role may do beyond the families it publishes and reads."""

    MANAGE_STREAMS = "manage_streams"
    INSPECT_STREAMS = "inspect_streams"


GRANT_DOCS: dict[Grant, str] = {
    Grant.MANAGE_STREAMS: "create, update, purge and delete the streams and any consumer",
    Grant.INSPECT_STREAMS: "list the streams and their consumers with their lag, read one "
    "message by its sequence (agents status; what a dead letter names)",
}


class Via(StrEnum):
    """How a reader reads a family."""

    DURABLE = "durable"
    """A durable pull consumer the reader owns (by its name): it creates it with one
    filter within the family, reads, acks and deletes it."""
    REPLAY = "replay"
    """The stream's messages read one by one by sequence (`STREAM.MSG.GET` with
    `next_by_subj`), woken by a core subscription to the family: no consumer at all, so
    nothing to create that another's consumer could be mistaken for."""
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
"""A consumer value: a `str` names a worker setting (bootstrap.settings.Settings), a
number is the value itself."""


@dataclass(frozen=True, slots=True)
class ConsumerSpec:
    """How the workers configure and pull one of their durable consumers."""

    ack_wait: Setting
    batch_size: Setting
    max_wait: Setting = "pull_wait_seconds"
    """Seconds an idle pull waits for a first message (PULL_WAIT_SECONDS, 1 s by
    default). A pull returns as soon as one arrives, so a longer wait costs no latency;
    each expiry costs a pull request and its answer, and a stopping puller notices the
    stop when its pull ends. (The recorder's wait was once 20 ms: an idle `agents up`
    then used 5.6 % of a core and its nats-server 3.3 %, against 2.4 % and 0.7 % at 1 s.)"""
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
    partitions: str | None = None
    """The worker setting saying in how many partitions the family is read (None: one
    durable). Each partition is a durable of its own, pulled by one replica at a time
    under its own lease, and the partitions are spread over the live replicas
    (contracts.shared.partitions, workers.leading); so it implies `one_replica`."""

    def __post_init__(self) -> None:
        if self.partitions is not None and not self.one_replica:
            raise ValueError("a partitioned durable is pulled by one replica per partition "
                             "(one_replica)")


@dataclass(frozen=True, slots=True)
class Publisher:
    role: Role
    used_by: str
    """What publishes it (a client call, a command, a worker)."""
    subject: str | None = None
    """A narrower pattern than the family's (a literal in place of a token), if any."""
    signs: bool = True
    """False: it republishes messages others signed (a dead letter's retry keeps the
    original Ledger-* headers), so its role is not one a signer of the family may have."""


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
            raise ValueError("a reader through a durable names it, and no other reader does")
        if self.consumer is not None and (self.role is not Role.WORKER
                                          or self.via is not Via.DURABLE):
            raise ValueError("only the workers' durables carry a consumer spec")
        if self.via is Via.RESPONDER and not self.queue:
            raise ValueError("a responder answers in a queue group")
        unknown = [t for t in tokens(self.durable or "") if t not in NAME_TOKENS]
        if unknown or "." in (self.durable or "") or (self.role is Role.WORKER
                                                       and tokens(self.durable or "")):
            raise ValueError(f"durable {self.durable!r}: one subject token, owned by being "
                             f"written out, so its only tokens are {NAME_TOKENS} (none for "
                             "workers)")

    @property
    def fixed_durable(self) -> bool:
        """The durable has one name, known now (no token in it)."""
        return self.durable is not None and not tokens(self.durable)


def tokens(pattern: str) -> list[str]:
    """The `{token}`s of a subject pattern or durable name, in order."""
    return [name for _, name, _, _ in string.Formatter().parse(pattern) if name]
