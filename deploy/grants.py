"""What each principal may do on NATS, from the declared message families
(deploy.permissions writes it out).

Permissions are written for a *holder*: a principal of the principals file (one nkey
user per key), or a role's password user (named after its role). One rule per way of
using a family:

- publishing a family: its subjects, one `*` per token (or the publisher's narrower
  pattern);
- reading through a core subscription, or answering requests: subscribe to everything
  under the family's name (answering also allows the responses);
- replaying the stream: read a message by sequence (`STREAM.MSG.GET`), and hear the
  family's core messages that say when to read again. No consumer is created, so no
  consumer-create permission without a name in it exists for any holder but the workers
  (through one, a body naming an existing durable would update it);
- reading through a durable the holder owns, by its exact name: create it with one
  filter within the family (the filter rides in the create subject, and the server
  refuses a body whose filter differs), look it up, pull it, delete it, acknowledge its
  messages, hear its max-deliveries advisory;
- every durable someone owns (the workers' and every principal's) is denied by name to
  every other holder but the workers, whatever a wildcard elsewhere allows;
- replies: each holder subscribes to its own inbox prefix (`_INBOX_<name>.>`) only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from contracts.families import FAMILIES, GRANTS
from contracts.shared.families import MessageFamily, wildcard
from contracts.shared.partitions import every_partition
from contracts.shared.roles import (
    CONSUMER,
    GRANT_DOCS,
    PRINCIPAL,
    Grant,
    Publisher,
    Reader,
    Role,
    Via,
    tokens,
)
from contracts.trust.principals import Principal

API = "$JS.API"
ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"
GRANTED: dict[Grant, tuple[str, ...]] = {
    Grant.MANAGE_STREAMS: (f"{API}.>",),
    Grant.INSPECT_STREAMS: (f"{API}.STREAM.LIST", f"{API}.STREAM.INFO.*",
                            f"{API}.CONSUMER.LIST.*", f"{API}.CONSUMER.INFO.*.*",
                            f"{API}.STREAM.MSG.GET.*"),
}


def inbox_prefix(name: str) -> str:
    """The holder's own inbox prefix: replies (PubAcks, API answers, pulled messages)
    reach `_INBOX_<name>.…`, which no other holder may subscribe to."""
    return f"_INBOX_{name}"


@dataclass(frozen=True, slots=True)
class Holder:
    """Whom one block of permissions is for."""

    name: str
    role: Role
    consumers: tuple[str, ...] = ()
    """Durable names it declares it owns (a subscriber's feeds, a runtime's extra ones)."""
    any_consumer: bool = False
    """A role's password user: its declared names are unknown, so any name (`*`)."""

    @classmethod
    def of_role(cls, role: Role) -> Holder:
        return cls(role.value, role, any_consumer=True)

    @classmethod
    def of(cls, principal: Principal) -> Holder:
        return cls(principal.name, principal.role, tuple(principal.consumers))


@dataclass
class Grants:
    """One holder's permissions: each subject with why it is there (the first reason)."""

    publish: dict[str, str] = field(default_factory=dict)
    subscribe: dict[str, str] = field(default_factory=dict)
    deny_publish: list[str] = field(default_factory=list)
    deny_subscribe: list[str] = field(default_factory=list)
    responds: bool = False

    def allow(self, side: dict[str, str], why: str, subjects: Iterable[str]) -> None:
        for subject in subjects:
            side.setdefault(subject, why)


def durable_names(reader: Reader, holder: Holder) -> list[str]:
    """The exact names `holder` owns through `reader` (`*` for a role's user whose
    declared names are unknown; none when it declares none)."""
    pattern = reader.durable or ""
    if CONSUMER in tokens(pattern):
        if holder.any_consumer:
            return ["*"]
        return [pattern.format(**{PRINCIPAL: holder.name, CONSUMER: c})
                for c in holder.consumers]
    return [pattern.format(**{PRINCIPAL: holder.name})] if tokens(pattern) else [pattern]


def owned(holder: Holder) -> list[tuple[str, str]]:
    """(stream, durable name) of every durable `holder` owns by an exact name."""
    out: list[tuple[str, str]] = []
    for family in FAMILIES:
        for r in family.readers:
            if r.via is Via.DURABLE and r.role is holder.role and family.stream:
                out += [(family.stream.name, n) for n in durable_names(r, holder) if n != "*"]
    return list(dict.fromkeys(out))


def _publish(g: Grants, family: MessageFamily, p: Publisher) -> None:
    g.allow(g.publish, f"{family.name}: {p.used_by}",
            [wildcard(p.subject) if p.subject else family.wildcard])


def _read(g: Grants, family: MessageFamily, r: Reader, holder: Holder) -> None:
    why = f"{family.name}: {r.used_by}"
    if r.via in (Via.CORE, Via.RESPONDER):
        g.allow(g.subscribe, why, [family.everything])
        g.responds = g.responds or r.via is Via.RESPONDER
        return
    assert family.stream is not None  # a family outside the streams has core readers only
    stream = family.stream.name
    if r.via is Via.REPLAY:
        g.allow(g.publish, why, [f"{API}.STREAM.MSG.GET.{stream}"])
        g.allow(g.subscribe, why, [family.everything])
        return
    names = (own_durables(family, r.durable) if r.durable is not None and r.fixed_durable
             else durable_names(r, holder))
    for name in names:
        if r.role is not Role.WORKER:  # the workers manage every consumer (MANAGE_STREAMS)
            g.allow(g.publish, why, [f"{API}.CONSUMER.CREATE.{stream}.{name}.{family.wildcard}",
                                     *(f"{API}.CONSUMER.{op}.{stream}.{name}"
                                       for op in ("INFO", "DELETE", "MSG.NEXT"))])
        g.allow(g.publish, why, [f"$JS.ACK.{stream}.{name}.>"])
        g.allow(g.subscribe, why, [f"{ADVISORY}.{stream}.{name}"])


def grants(holder: Holder, others: Sequence[Holder] = ()) -> Grants:
    """`holder`'s permissions; `others` are the deployment's other holders, whose
    durables `holder` is denied by name (the workers' always are)."""
    g = Grants()
    g.allow(g.subscribe, "replies: PubAcks, API answers, pulled messages, to this holder's "
            "own inbox prefix", [f"{inbox_prefix(holder.name)}.>"])
    for grant in GRANTS[holder.role]:
        g.allow(g.publish, f"{grant.value}: {GRANT_DOCS[grant]}", GRANTED[grant])
    for family in FAMILIES:
        for p in family.publishers:
            if p.role is holder.role:
                _publish(g, family, p)
        for r in family.readers:
            if r.role is holder.role:
                _read(g, family, r, holder)
    if holder.role is not Role.WORKER:
        mine = set(owned(holder))
        theirs = [d for d in [*workers_durables(), *(d for o in others for d in owned(o))]
                  if d not in mine]
        g.deny_publish, g.deny_subscribe = denied(dict.fromkeys(theirs))
    return g


CONSUMER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""A durable name a principal may own: one subject token, no wildcard, nothing a
permission would read as a pattern."""


def clashes(holders: Sequence[Holder]) -> list[str]:
    """Why these holders cannot be written out: a declared name that is no plain name
    (a `*` would grant every durable), or a durable owned twice (a subscriber declaring
    `corrector` would be granted the workers' durable)."""
    out = [f"{h.name}: consumer name {c!r} is not [A-Za-z0-9_-]{{1,64}}"
           for h in holders for c in h.consumers if not CONSUMER_NAME.match(c)]
    seen: dict[tuple[str, str], str] = {d: "the workers" for d in workers_durables()}
    for h in holders:
        if h.role is Role.WORKER:
            continue
        for d in owned(h):
            if d in seen and seen[d] != h.name:
                out.append(f"{h.name}: durable {d[1]!r} on {d[0]} is {seen[d]}'s")
            seen.setdefault(d, h.name)
    return out


def workers_durables() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for family in FAMILIES:
        # The pulled ones (worker_consumers) and any other fixed-name durable of the
        # workers' (the webhooks' dispatcher reads every event family through one).
        for r in family.readers:
            if r.role is not Role.WORKER or r.via is not Via.DURABLE:
                continue
            assert family.stream is not None and r.fixed_durable and r.durable
            out += [(family.stream.name, d) for d in own_durables(family, r.durable)]
    return list(dict.fromkeys(out))


def denied(durables: Iterable[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """What operating each of `durables` takes: create, update, look up, pull, delete,
    pause or acknowledge it (publish), hear its advisories (subscribe)."""
    publish: list[str] = []
    subscribe: list[str] = []
    for s, d in durables:
        publish += [f"{API}.CONSUMER.*.{s}.{d}", f"{API}.CONSUMER.*.*.{s}.{d}",
                    f"{API}.CONSUMER.CREATE.{s}.{d}.>", f"$JS.ACK.{s}.{d}.>"]
        subscribe.append(f"$JS.EVENT.ADVISORY.CONSUMER.*.{s}.{d}")
    return publish, subscribe


def own_durables(family: MessageFamily, durable: str) -> list[str]:
    """A worker durable's names: a partitioned one has one per partition, and the count
    is a worker setting, so every name any count could give (`recorder`, `recorder-0`
    ... `recorder-31`: contracts.shared.partitions)."""
    if family.partitioned is None:
        return [durable]
    return [p.durable for p in every_partition(family.name, durable)]
