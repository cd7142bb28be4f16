"""What each role may do on NATS, from the declared message families (deploy.permissions
writes it out).

One rule per way of using a family:

- publishing a family: its subjects, one `*` per token (or the publisher's narrower
  pattern);
- reading through a core subscription, or answering requests: subscribe to everything
  under the family's name (answering also allows the responses);
- reading through an ordered consumer: create an unnamed consumer on the stream, its
  flow control, and find the stream by subject;
- reading through a durable the reader owns: create, look up, delete and pull that
  durable, acknowledge its messages, hear its max-deliveries advisory. A name with a
  token chosen at run time can only be permitted as any name (`*`);
- the workers' own durables (fixed names) are denied to every other role, whatever
  else that role may do on the stream;
- every role subscribes to `_INBOX.>` for its replies; the role grants (contracts.
  families.GRANTS) add managing or inspecting the streams.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from contracts.families import FAMILIES, GRANTS
from contracts.shared.families import MessageFamily, wildcard
from contracts.shared.roles import (
    GRANT_DOCS,
    PRINCIPAL,
    Grant,
    Publisher,
    Reader,
    Role,
    Via,
    tokens,
)

API = "$JS.API"
ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"
INBOX = "_INBOX.>"
GRANTED: dict[Grant, tuple[str, ...]] = {
    Grant.MANAGE_STREAMS: (f"{API}.>",),
    Grant.INSPECT_STREAMS: (f"{API}.STREAM.LIST", f"{API}.STREAM.INFO.*",
                            f"{API}.CONSUMER.LIST.*", f"{API}.CONSUMER.INFO.*.*",
                            f"{API}.STREAM.MSG.GET.*"),
    Grant.TEND_CONSUMERS: (f"{API}.CONSUMER.DELETE.*.*",),
}


@dataclass
class Grants:
    """One role's permissions: each subject with why it is there (the first reason)."""

    publish: dict[str, str] = field(default_factory=dict)
    subscribe: dict[str, str] = field(default_factory=dict)
    responds: bool = False

    def allow(self, side: dict[str, str], why: str, subjects: Iterable[str]) -> None:
        for subject in subjects:
            side.setdefault(subject, why)


def durable_name(reader: Reader) -> str:
    """The durable's name in a permission: `{principal}` is the reader's (one user per
    role today: the role's), and a token chosen at run time can only be any name."""
    name = (reader.durable or "").replace(f"{{{PRINCIPAL}}}", reader.role.value)
    return "*" if tokens(name) else name


def _publish(g: Grants, family: MessageFamily, p: Publisher) -> None:
    g.allow(g.publish, f"{family.name}: {p.used_by}",
            [wildcard(p.subject) if p.subject else family.wildcard])


def _read(g: Grants, family: MessageFamily, r: Reader) -> None:
    why = f"{family.name}: {r.used_by}"
    if r.via in (Via.CORE, Via.RESPONDER):
        g.allow(g.subscribe, why, [family.everything])
        g.responds = g.responds or r.via is Via.RESPONDER
        return
    assert family.stream is not None  # a family outside the streams has core readers only
    stream = family.stream.name
    if r.via is Via.ORDERED:
        g.allow(g.publish, why, [f"{API}.STREAM.NAMES", f"{API}.CONSUMER.CREATE.{stream}",
                                 f"$JS.FC.{stream}.>"])
        return
    name = durable_name(r)
    if r.role is not Role.WORKER:  # the workers manage every consumer (MANAGE_STREAMS)
        g.allow(g.publish, why, [f"{API}.CONSUMER.{op}.{stream}.{name}" for op in
                                 ("DURABLE.CREATE", "INFO", "DELETE", "MSG.NEXT")])
    g.allow(g.publish, why, [f"$JS.ACK.{stream}.{name}.>"])
    g.allow(g.subscribe, why, [f"{ADVISORY}.{stream}.{name}"])


def grants(role: Role) -> Grants:
    g = Grants()
    g.allow(g.subscribe, "replies: PubAcks, API responses, ordered consumers' deliveries",
            [INBOX])
    for grant in GRANTS[role]:
        g.allow(g.publish, f"{grant.value}: {GRANT_DOCS[grant]}", GRANTED[grant])
    for family in FAMILIES:
        for p in family.publishers:
            if p.role is role:
                _publish(g, family, p)
        for r in family.readers:
            if r.role is role:
                _read(g, family, r)
    return g


def workers_own() -> tuple[list[str], list[str]]:
    """What every other role is denied: each of the workers' own durables (publish,
    subscribe), whatever a wildcard elsewhere allows."""
    publish: list[str] = []
    subscribe: list[str] = []
    for family in FAMILIES:
        # The pulled ones (worker_consumers) and any other fixed-name durable of the
        # workers' (the webhooks' dispatcher reads every event family through one).
        for r in family.readers:
            if r.role is not Role.WORKER or r.via is not Via.DURABLE:
                continue
            assert family.stream is not None and r.fixed_durable
            s, d = family.stream.name, r.durable
            publish += [f"{API}.CONSUMER.*.{s}.{d}", f"{API}.CONSUMER.*.*.{s}.{d}",
                        f"{API}.CONSUMER.CREATE.{s}.{d}.>", f"$JS.ACK.{s}.{d}.>"]
            subscribe.append(f"$JS.EVENT.ADVISORY.CONSUMER.*.{s}.{d}")
    return list(dict.fromkeys(publish)), list(dict.fromkeys(subscribe))
