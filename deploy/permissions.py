"""deploy/nats-auth.conf, written from the declared message families:
`python -m deploy.permissions` (`--check`: fail when the committed file differs).

Each role's permissions follow from what the declarations say it does
(contracts.families), by one rule per way of using a family:

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

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from contracts.families import FAMILIES, GRANTS
from contracts.shared.families import MessageFamily, wildcard
from contracts.shared.roles import (
    GRANT_DOCS,
    PRINCIPAL,
    ROLE_DOCS,
    Grant,
    Publisher,
    Reader,
    Role,
    Via,
    tokens,
)

CONF_PATH = Path(__file__).resolve().parent / "nats-auth.conf"
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
        for r in family.worker_consumers():
            assert family.stream is not None and r.fixed_durable
            s, d = family.stream.name, r.durable
            publish += [f"{API}.CONSUMER.*.{s}.{d}", f"{API}.CONSUMER.*.*.{s}.{d}",
                        f"{API}.CONSUMER.CREATE.{s}.{d}.>", f"$JS.ACK.{s}.{d}.>"]
            subscribe.append(f"$JS.EVENT.ADVISORY.CONSUMER.*.{s}.{d}")
    return publish, subscribe


HEADER = """\
# GENERATED by `python -m deploy.permissions` from the message families declared in
# contracts/*/families.py (who publishes and who reads each, and how): edit those and
# regenerate; a test and scripts/lint fail when this file differs from them.
#
# Who may do what on the ledger's NATS: four roles, enforced by nats-server.
# deploy/nats-server.conf includes it (`include "nats-auth.conf"`, top level, beside
# `jetstream`); a config of your own does the same.
#
# Passwords come from the environment (nats-server reads `$NAME` from it when the file
# does not define it; a missing one stops the server at start, so no role is ever
# left open by accident):
#
#   LEDGER_WORKER_PASSWORD  LEDGER_AGENT_PASSWORD  LEDGER_OPERATOR_PASSWORD
#   LEDGER_SUBSCRIBER_PASSWORD
#
# Clients connect as `nats://agent:<password>@host:4222` (or NATS_USER/NATS_PASSWORD,
# NATS_TOKEN, NATS_NKEY_SEED, NATS_CREDS: docs/operations.md "Access control").
# A password may be stored bcrypt-hashed instead (`nats server passwd` prints one).
# To use nkeys, replace a user's `user`/`password` by `nkey: U...` (its public key,
# from `nk -gen user -pubout`) and give the client the seed file (NATS_NKEY_SEED).
# More users of a role: more entries with the same `permissions: $ROLE_PERMISSIONS`
# (in a copy of this file: this one is regenerated).
#
# Cluster routes get their own credentials, in deploy/nats-server.conf's `cluster`
# block (NATS_ROUTE_PASSWORD, and in every route URL), so a process that can reach
# port 6222 cannot join the cluster and read every stream.
#
# Limits of what subjects can say (docs/operations.md): a permission on
# `$JS.API.CONSUMER.CREATE.<stream>` covers the whole stream, since nats-py puts the
# consumer's filter in the subject only in one case; so a role that may read a stream
# through a consumer may read all of it. A durable whose name is chosen at run time can
# only be permitted as any name. Replies use `_INBOX.>`, which every role may
# subscribe to.
"""
WIDTH = 88


def _wrapped(items: Iterable[str], indent: str, sep: str) -> list[str]:
    lines: list[str] = []
    line = ""
    for item in items:
        if line and len(indent) + len(line) + len(sep) + len(item) > WIDTH:
            lines.append(indent + line)
            line = ""
        line = f"{line}{sep}{item}" if line else item
    return [*lines, indent + line] if line else lines


def _entries(side: dict[str, str], indent: str) -> list[str]:
    """`# why` then the subjects it allows, wrapped, for each reason in order."""
    by_why: dict[str, list[str]] = {}
    for subject, why in side.items():
        by_why.setdefault(why, []).append(subject)
    lines: list[str] = []
    for why, subjects in by_why.items():
        lines += _wrapped(why.split(), f"{indent}# ", " ")
        lines += _wrapped((f'"{s}"' for s in subjects), indent, ", ")
    return lines


def _side(name: str, allowed: dict[str, str], deny: str | None) -> list[str]:
    out = [f"  {name}: {{", "    allow: [", *_entries(allowed, "      "), "    ]"]
    if deny is not None:
        out.append(f"    deny: ${deny}")
    return [*out, "  }"]


def role_block(role: Role) -> list[str]:
    g = grants(role)
    others = role is not Role.WORKER
    lines = [f"# --- {role.value}: {ROLE_DOCS[role]}", f"{role.value.upper()}_PERMISSIONS = {{",
             *_side("publish", g.publish, "WORKERS_OWN_PUBLISH" if others else None),
             *_side("subscribe", g.subscribe, "WORKERS_OWN_SUBSCRIBE" if others else None)]
    if g.responds:
        lines.append("  # Answering a request is a publish to the requester's inbox.")
        lines.append("  allow_responses: true")
    return [*lines, "}", ""]


def _array(name: str, subjects: list[str]) -> list[str]:
    return [f"{name} = [", *(f'  "{s}"' for s in subjects), "]"]


def render() -> str:
    publish, subscribe = workers_own()
    lines = [HEADER, "# --- the workers' own durables: no other role may create, update, "
             "look up, pull,", "# delete or acknowledge them, or hear their advisories",
             *_array("WORKERS_OWN_PUBLISH", publish),
             *_array("WORKERS_OWN_SUBSCRIBE", subscribe), ""]
    for role in Role:
        lines += role_block(role)
    lines += ["authorization {", "  users: ["]
    lines += [f"    {{ user: {r.value}, password: $LEDGER_{r.value.upper()}_PASSWORD, "
              f"permissions: ${r.value.upper()}_PERMISSIONS }}" for r in Role]
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    if "--check" in sys.argv:
        if CONF_PATH.read_text() != render():
            sys.exit(f"{CONF_PATH} is stale: run python -m deploy.permissions")
        return
    CONF_PATH.write_text(render())
    print(f"wrote {CONF_PATH}")


if __name__ == "__main__":
    main()
