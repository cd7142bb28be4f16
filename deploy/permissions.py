"""The nats-server authorization, written from the declared message families:

    python -m deploy.permissions                       # deploy/nats-auth.conf (role users)
    python -m deploy.permissions --principals FILE     # one nkey user per key, to stdout
    python -m deploy.permissions --principals FILE --out nats-principals.conf
    python -m deploy.permissions --check               # the committed files are current

What each holder may do follows from the declarations by the rules of deploy.grants;
this module writes it out in nats-server's configuration format, each subject under a
comment naming the family and what uses it. `--check` also checks the shipped example
(deploy/principals.example.toml and what it generates) and the roles table of
docs/security.md, which the first form rewrites too.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from contracts.shared.roles import ROLE_DOCS, Role
from contracts.trust.principals import Directory, Principal, PrincipalKey, load_directory
from deploy.grants import Grants, Holder, clashes, grants, inbox_prefix
from deploy.permission_texts import PRINCIPALS_HEADER, ROLES_HEADER
from deploy.roles_table import DOC, with_table

HERE = Path(__file__).resolve().parent
CONF_PATH = HERE / "nats-auth.conf"
EXAMPLE_PRINCIPALS = HERE / "principals.example.toml"
EXAMPLE_CONF = HERE / "nats-principals.example.conf"
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


def _side(name: str, allowed: dict[str, str], deny: list[str]) -> list[str]:
    out = [f"  {name}: {{", "    allow: [", *_entries(allowed, "      "), "    ]"]
    if deny:
        out += ["    # every durable someone else owns, by name: the workers' and other",
                "    # principals'", "    deny: [",
                *_wrapped((f'"{s}"' for s in deny), "      ", ", "), "    ]"]
    return [*out, "  }"]


def variable(index: int, holder: Holder) -> str:
    """A configuration variable for `holder`'s permissions (the index keeps `a-b` and
    `a_b` apart)."""
    return f"P{index}_{re.sub(r'[^A-Z0-9]', '_', holder.name.upper())}"


def block(name: str, holder: Holder, g: Grants) -> list[str]:
    title = f"--- {holder.name} ({holder.role.value}): {ROLE_DOCS[holder.role]}"
    lines = [*_wrapped(title.split(), "# ", " "),
             f"# Replies reach {inbox_prefix(holder.name)}.> only.", f"{name} = {{",
             *_side("publish", g.publish, g.deny_publish),
             *_side("subscribe", g.subscribe, g.deny_subscribe)]
    if g.responds:
        lines.append("  # Answering a request is a publish to the requester's inbox.")
        lines.append("  allow_responses: true")
    return [*lines, "}", ""]


def render() -> str:
    """deploy/nats-auth.conf: one password user per role, named after it."""
    holders = [Holder.of_role(r) for r in Role]
    lines = [ROLES_HEADER]
    for h in holders:
        lines += block(f"{h.role.value.upper()}_PERMISSIONS", h, grants(h, holders))
    lines += ["authorization {", "  users: ["]
    lines += [f"    {{ user: {r.value}, password: $LEDGER_{r.value.upper()}_PASSWORD, "
              f"permissions: ${r.value.upper()}_PERMISSIONS }}" for r in Role]
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def usable(key: PrincipalKey, at: datetime) -> bool:
    """A key may connect now: not revoked, inside its validity window."""
    return key.refusal_at(at) is None


def render_principals(directory: Directory, at: datetime | None = None) -> str:
    """An authorization block with one nkey user per usable key of every principal,
    each with its principal's permissions (keys revoked or outside their window at `at`
    are left out: regenerate and reload the server when one changes)."""
    at = at or datetime.now(UTC)
    holders = [Holder.of(p) for p in directory.principals]
    wrong = clashes(holders)
    if wrong:
        raise ValueError("principals file: " + "; ".join(wrong))
    lines = [PRINCIPALS_HEADER]
    users: list[str] = []
    for i, (p, h) in enumerate(zip(directory.principals, holders, strict=True), 1):
        name = variable(i, h)
        lines += block(name, h, grants(h, [o for o in holders if o is not h]))
        users += _users(p, name, at)
    lines += ["authorization {", "  users: [", *users, "  ]", "}"]
    return "\n".join(lines) + "\n"


def _users(p: Principal, name: str, at: datetime) -> list[str]:
    keys = [k for k in p.keys if usable(k, at)]
    left = len(p.keys) - len(keys)
    out = [f"    # {p.name} ({p.role.value}): {len(keys)} key(s)"
           + (f", {left} revoked or out of their window left out" if left else "")]
    return [*out, *(f"    {{ nkey: {k.public}, permissions: ${name} }}" for k in keys)]


EXAMPLE_AT = datetime(2026, 1, 1, tzinfo=UTC)
"""The example is rendered as of this time, so the committed file never goes stale."""


def _check(paths: Sequence[tuple[Path, str]]) -> None:
    stale = [str(p) for p, text in paths if not p.exists() or p.read_text() != text]
    if stale:
        sys.exit(f"stale: {', '.join(stale)}: run python -m deploy.permissions "
                 "(and --principals deploy/principals.example.toml --out "
                 "deploy/nats-principals.example.conf --at 2026-01-01T00:00:00Z)")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m deploy.permissions")
    ap.add_argument("--check", action="store_true", help="fail when a committed file differs")
    ap.add_argument("--principals", type=Path, help="a principals file (LEDGER_PRINCIPALS)")
    ap.add_argument("--out", type=Path, help="where to write (default: stdout)")
    ap.add_argument("--at", type=datetime.fromisoformat, help="judge the keys' windows at")
    args = ap.parse_args(argv)
    if args.check:
        example = load_directory(EXAMPLE_PRINCIPALS.read_text())
        _check([(CONF_PATH, render()),
                (EXAMPLE_CONF, render_principals(example, EXAMPLE_AT)),
                (DOC, with_table(DOC.read_text()))])
        return
    if args.principals is None:
        CONF_PATH.write_text(render())
        DOC.write_text(with_table(DOC.read_text()))
        print(f"wrote {CONF_PATH} and the roles table of {DOC}")
        return
    try:
        directory = load_directory(args.principals.read_text())
    except (OSError, ValueError) as exc:
        sys.exit(f"error: {args.principals}: {exc}")
    try:
        text = render_principals(directory, args.at)
    except ValueError as exc:
        sys.exit(f"error: {args.principals}: {exc}")
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
