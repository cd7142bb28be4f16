"""Every attack a principal tries on the server: the JetStream API surface, others'
durables, its own durables read beyond their family, others' inboxes, forged events
and commands, and subscriptions to what is not its own.

`$JS.API` subjects are those nats-server answers (its `JSApi*` constants); each is
tried on each stream where it takes one.
"""

from __future__ import annotations

import json
import re

from clients._feed_guard import subject_matches
from contracts.families import FAMILIES
from contracts.families import STREAMS as DECLARED_STREAMS
from contracts.shared.families import Direction
from contracts.shared.ids import new_id
from contracts.shared.roles import Role
from tests.attack.attacks import Attack
from tests.attack.deployment import Deployment

API = "$JS.API"
STREAMS = tuple(s.name for s in DECLARED_STREAMS)
"""Every stream the ledger declares (a capability added later is attacked too)."""
PLAN = new_id()
FILTERS = {"DECISIONS": "decisions.recorded.*", "CORRECTIONS": "corrections.events.*.*",
           "INVARIANTS": "invariants.events.*.*", "WEBHOOKS": "webhooks.deliveries.*.*"}
TOKENS = {"plan_id": PLAN, "status": "applied", "state": "complete", "what": "violated",
          "change": "added", "outcome": "failed", "webhook_id": new_id()}
"""What fills a declared subject's tokens in a forgery (a token not named here: `forged`)."""


def _filled(template: str, fill: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: fill.get(m[1], "forged"), template)


def events_forged_by(role: Role) -> list[str]:
    """A subject of every declared event family that `role` may not publish, so an event
    family added later is forged too; a role that publishes a narrower pattern of one
    (an operator's `.resolved`) forges the rest of it."""
    out = []
    for f in FAMILIES:
        if f.direction is not Direction.EVENT:
            continue
        own = [p for p in f.publishers if p.role is role]
        if any(p.subject is None for p in own):
            continue
        subject = _filled(f.subject, TOKENS)
        allowed = [_filled(p.subject, {}).replace("forged", "*") for p in own if p.subject]
        if not any(subject_matches(a, subject) for a in allowed):
            out.append(subject)
    return out


COMMANDS = [f"corrections.requested.{PLAN}", f"corrections.cancel.{PLAN}",
            f"corrections.fail.{PLAN}", f"corrections.retry.{PLAN}",
            f"corrections.dryrun.{PLAN}"]


def _body(config: dict[str, object], stream: str) -> bytes:
    return json.dumps({"stream_name": stream, "config": config}).encode()


def stream_management() -> list[Attack]:
    out = [Attack("create a stream", f"{API}.STREAM.CREATE.STOLEN",
                  body=json.dumps({"name": "STOLEN", "subjects": ["stolen.>"]}).encode()),
           Attack("read the account's JetStream info", f"{API}.INFO"),
           Attack("purge the account", f"{API}.ACCOUNT.PURGE"),
           Attack("make the meta leader step down", f"{API}.META.LEADER.STEPDOWN"),
           Attack("remove a server", f"{API}.SERVER.REMOVE")]
    for s in STREAMS:
        out += [Attack(f"update {s}", f"{API}.STREAM.UPDATE.{s}",
                       body=json.dumps({"name": s, "subjects": ["x.>"]}).encode()),
                Attack(f"delete {s}", f"{API}.STREAM.DELETE.{s}"),
                Attack(f"purge {s}", f"{API}.STREAM.PURGE.{s}"),
                Attack(f"delete a message of {s}", f"{API}.STREAM.MSG.DELETE.{s}",
                       body=b'{"seq": 1}'),
                Attack(f"snapshot {s}", f"{API}.STREAM.SNAPSHOT.{s}"),
                Attack(f"restore over {s}", f"{API}.STREAM.RESTORE.{s}"),
                Attack(f"make {s}'s leader step down", f"{API}.STREAM.LEADER.STEPDOWN.{s}"),
                Attack(f"remove a peer of {s}", f"{API}.STREAM.PEER.REMOVE.{s}"),
                Attack(f"move {s}", f"{API}.ACCOUNT.STREAM.MOVE.{s}"),
                Attack(f"direct get from {s}", f"{API}.DIRECT.GET.{s}", body=b'{"seq": 1}'),
                Attack(f"direct get {s}'s last by subject",
                       f"{API}.DIRECT.GET.{s}.{s.lower()}.x.{PLAN}"),
                Attack(f"list {s}'s consumer names", f"{API}.CONSUMER.NAMES.{s}"),
                Attack(f"create an unnamed (ordered, push) consumer on {s}",
                       f"{API}.CONSUMER.CREATE.{s}",
                       body=_body({"deliver_subject": f"corrections.events.{PLAN}.applied",
                                   "ack_policy": "none"}, s)),
                Attack(f"create a durable on {s} the legacy way",
                       f"{API}.CONSUMER.DURABLE.CREATE.{s}.mine",
                       body=_body({"durable_name": "mine", "ack_policy": "explicit"}, s))]
    return out


def inspection(role: Role) -> list[Attack]:
    """What operators may inspect and nobody else may: agents read DECISIONS by
    sequence (their replay), nothing else."""
    if role is Role.OPERATOR:
        return []
    out = [Attack("list the streams", f"{API}.STREAM.LIST"),
           Attack("list the stream names", f"{API}.STREAM.NAMES")]
    for s in STREAMS:
        out += [Attack(f"read {s}'s info", f"{API}.STREAM.INFO.{s}"),
                Attack(f"list {s}'s consumers", f"{API}.CONSUMER.LIST.{s}")]
        if not (role is Role.AGENT and s == "DECISIONS"):
            out.append(Attack(f"read a message of {s} by sequence",
                              f"{API}.STREAM.MSG.GET.{s}", body=b'{"seq": 1}'))
    return out


def others_durable(stream: str, durable: str) -> list[Attack]:
    """Every way of operating a durable someone else owns."""
    c = f"{API}.CONSUMER"
    hijack = {"name": durable, "ack_policy": "explicit", "filter_subject": FILTERS[stream]}
    return [
        Attack(f"update {durable} through an unnamed create", f"{c}.CREATE.{stream}",
               body=_body(hijack, stream)),
        Attack(f"update {durable} by its name", f"{c}.CREATE.{stream}.{durable}",
               body=_body(hijack, stream)),
        Attack(f"update {durable} by its name and filter",
               f"{c}.CREATE.{stream}.{durable}.{FILTERS[stream]}", body=_body(hijack, stream)),
        Attack(f"update {durable} the legacy way", f"{c}.DURABLE.CREATE.{stream}.{durable}",
               body=_body({**hijack, "durable_name": durable}, stream)),
        Attack(f"look {durable} up", f"{c}.INFO.{stream}.{durable}"),
        Attack(f"delete {durable}", f"{c}.DELETE.{stream}.{durable}"),
        Attack(f"pull from {durable}", f"{c}.MSG.NEXT.{stream}.{durable}",
               body=b'{"batch": 10, "expires": 1000000000}'),
        Attack(f"pause {durable}", f"{c}.PAUSE.{stream}.{durable}"),
        Attack(f"unpin {durable}", f"{c}.UNPIN.{stream}.{durable}"),
        Attack(f"make {durable}'s leader step down", f"{c}.LEADER.STEPDOWN.{stream}.{durable}"),
        Attack(f"acknowledge a message of {durable}", f"$JS.ACK.{stream}.{durable}.1.1.1.1.0"),
        Attack(f"hear {durable}'s advisories", f"$JS.EVENT.ADVISORY.CONSUMER.*.{stream}.{durable}",
               op="sub"),
    ]


def own_durables_beyond_their_family(dep: Deployment, name: str) -> list[Attack]:
    """A principal's own durable, created to read more than its family."""
    p = dep.principal(name)
    names = ([f"resume_{name}"] if p.role is Role.AGENT else []) + list(p.consumers)
    out: list[Attack] = []
    for d in names:
        for stream, filt in (("CORRECTIONS", "corrections.>"),
                             ("CORRECTIONS", "corrections.requested.*"),
                             ("DECISIONS", "decisions.recorded.*")):
            out.append(Attack(f"create its own {d} over {filt}",
                              f"{API}.CONSUMER.CREATE.{stream}.{d}.{filt}",
                              body=_body({"name": d, "durable_name": d, "filter_subject": filt,
                                          "ack_policy": "explicit"}, stream)))
        out.append(Attack(f"create its own {d} without a filter in the subject",
                          f"{API}.CONSUMER.CREATE.CORRECTIONS.{d}",
                          body=_body({"name": d, "filter_subjects": ["corrections.>"],
                                      "ack_policy": "explicit"}, "CORRECTIONS")))
    return out


def inboxes(dep: Deployment, name: str) -> list[Attack]:
    out = [Attack("read every reply", "_INBOX.>", op="sub"),
           Attack("read everything", ">", op="sub")]
    for other in dep.names():
        if other != name:
            out += [Attack(f"read {other}'s replies", f"_INBOX_{other}.>", op="sub"),
                    Attack(f"write into {other}'s inbox", f"_INBOX_{other}.x.y",
                           body=b'{"forged": true}')]
    return out


def forgeries(role: Role) -> list[Attack]:
    out = [Attack(f"forge {s}", s) for s in events_forged_by(role)]
    if role is Role.OPERATOR:
        return out
    out += [Attack(f"send a command on {s}", s) for s in COMMANDS]
    if role is Role.SUBSCRIBER:
        out += [Attack("record a decision", f"decisions.recorded.{PLAN}"),
                Attack("report a violation", f"invariants.violations.{PLAN}")]
    return [*out, Attack("record on a longer subject", f"decisions.recorded.{PLAN}.x")]


def listening(role: Role) -> list[Attack]:
    out = [Attack("hear the decisions as they are sent", "decisions.recorded.>", op="sub"),
           Attack("answer dry runs", "corrections.dryrun.>", op="sub",
                  queue="corrections-dryrun"),
           Attack("hear every correction message", "corrections.>", op="sub"),
           Attack("hear JetStream's events", "$JS.EVENT.>", op="sub"),
           Attack("hear the system account", "$SYS.>", op="sub")]
    if role is not Role.OPERATOR:
        out.append(Attack("hear the correction events", "corrections.events.>", op="sub"))
    return out


def attacks_for(dep: Deployment, name: str) -> list[Attack]:
    role = dep.principal(name).role
    if role is Role.WORKER:  # trusted, and still: its own replies only, no commands
        return [Attack("read every reply", "_INBOX.>", op="sub"),
                Attack("read alice's replies", "_INBOX_alice.>", op="sub"),
                Attack("write into alice's inbox", "_INBOX_alice.x.y"),
                *(Attack(f"send a command on {s}", s) for s in COMMANDS[:4])]
    out = [*stream_management(), *inspection(role), *inboxes(dep, name), *forgeries(role),
           *listening(role), *own_durables_beyond_their_family(dep, name)]
    for stream, durable in dep.durables_of_others(name):
        out += others_durable(stream, durable)
    return out
