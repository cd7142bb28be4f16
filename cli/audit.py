"""`agents audit verify | export`: a plan's tamper-evident history (docs/security.md).

`verify` reads a plan's records from MongoDB as the lines an export would hold and
checks them (contracts.trust.audit): the chain, each kept signature against the
principals file, and each later change against the chained record that explains it. It
exits 0, or 6 naming the first broken link. `export` writes those lines as JSON Lines
for a check elsewhere (examples/verify_audit.py needs no part of this project).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, emit_json, out
from contracts.shared.persistence import ConcurrentChange

if TYPE_CHECKING:
    from contracts.trust.audit_findings import Report

app = typer.Typer(help="Tamper-evident history: verify a plan's record chain, export it "
                  "for an offline check.", no_args_is_help=True)

BROKEN = 6
"""Exit code of a verify that found a broken link (1 stays: unknown plan, server down)."""
SHOWN = 20

PrincipalsOpt = Annotated[Path | None, typer.Option(
    "--principals", help="The principals file whose keys the signatures are checked "
    "against (default: LEDGER_PRINCIPALS; without one only each signature's own key is "
    "checked).")]


async def _header_and_lines(ctx: Ctx, plan_ids: list[str], cut: str | None,
                            principals: Path | None, parameters: dict[str, Any]
                            ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from contracts.trust.audit_lines import header, principals_json
    from contracts.trust.chain import plain
    from contracts.trust.principals import load_directory

    path = principals or ctx.settings.ledger_principals
    directory = None
    if path is not None:
        try:
            directory = load_directory(path.read_text())
        except (OSError, ValueError) as exc:
            fail(f"principals file {path}: {exc}", USAGE_ERROR)
    try:
        entries, lines = await ctx.ledger.store.audit.export(plan_ids, cut)
    except ConcurrentChange as exc:  # a plan kept being written while it was read
        fail(str(exc))
    head = header(exported_at=plain(datetime.now(UTC)), parameters=parameters,
                  principals=principals_json(directory), plans=entries)
    return head, lines


def verify(
    plan: Annotated[str, typer.Argument(help="The plan (ULID).")],
    principals: PrincipalsOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Check a plan's record chain, its signatures and what explains each later change;
    exit 0, or 6 naming the first broken link."""
    plan_id = parse_id(plan, "plan")

    async def body(ctx: Ctx) -> Report:
        from contracts.trust.audit import verify_export

        head, lines = await _header_and_lines(ctx, [plan_id], None, principals,
                                              {"plans": [plan_id]})
        if not head["plans"]:
            fail(f"plan {plan_id} not found")
        return verify_export(head, lines)

    report = run(body)
    if as_json:
        emit_json(_report_json(plan_id, report))
    else:
        _print_report(plan_id, report)
    if not report.ok:
        raise typer.Exit(BROKEN)


def _report_json(plan_id: str, r: Report) -> dict[str, Any]:
    return {"plan_id": plan_id, "ok": r.ok, "records": r.records, "signed": r.signed,
            "ledger": r.ledger, "unsigned": r.unsigned, "unchecked": r.unchecked,
            "erased": r.erased,
            "keys_checked": r.keys_checked,
            "first_broken": str(r.findings[0]) if r.findings else None,
            "findings": [{"rule": f.rule, "plan_id": f.plan_id, "seq": f.seq,
                          "kind": f.kind, "record_id": f.record_id, "message": f.message}
                         for f in r.findings[:SHOWN]]}


def _print_report(plan_id: str, r: Report) -> None:
    out.print(f"plan {plan_id}: {r.records} chained record(s); {r.signed} signed and "
              f"verified, {len(r.unsigned)} unsigned (unverified), {r.ledger} written by "
              "the ledger itself")
    if not r.keys_checked:
        out.print("keys: no principals file, so each signature was checked against its own "
                  "key only (--principals or LEDGER_PRINCIPALS to check who held it)")
    if r.unsigned:
        out.print("unverified: " + ", ".join(escape(u) for u in r.unsigned[:SHOWN])
                  + (" …" if len(r.unsigned) > SHOWN else ""))
    if r.erased:
        out.print(f"erased: {len(r.erased)} record(s) whose text an erasure removed, checked "
                  "against the digests they kept: " + ", ".join(
                      escape(e) for e in r.erased[:SHOWN]) + (" …" if len(r.erased) > SHOWN
                                                              else ""))
    if r.unchecked:
        out.print(f"{len(r.unchecked)} signature(s) kept without their envelope (recorded "
                  "before it was kept): not checked again")
    if r.ok:
        out.print("[green]chain intact[/]")
        return
    out.print(f"[bold red]broken:[/] {escape(str(r.findings[0]))}")
    for f in r.findings[1:SHOWN]:
        out.print(f"  also {escape(str(f))}")
    if len(r.findings) > SHOWN:
        out.print(f"  … and {len(r.findings) - SHOWN} more")


def export(
    plans: Annotated[list[str] | None, typer.Argument(
        help="The plans (ULIDs); left out with --since: every plan written since.")] = None,
    since: Annotated[str | None, typer.Option(
        "--since", help="Only records written at or after this time (ISO 8601; UTC if "
        "no offset), each plan from the first such record on.")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write the JSON Lines here instead of stdout.")] = None,
    principals: PrincipalsOpt = None,
) -> None:
    """Write plans' records as JSON Lines: a header with the principals' public keys, then
    one line per record in chain order with its signature and chain link."""
    if not plans and since is None:
        fail("name a plan, or give --since TIME for every plan written since", USAGE_ERROR)
    plan_ids = [parse_id(p, "plan") for p in plans or []]
    cut = _cut(since) if since is not None else None

    async def body(ctx: Ctx) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        wanted = plan_ids
        if not wanted and cut is not None:
            wanted = await ctx.ledger.store.audit.plans_since(cut[1])
        return await _header_and_lines(ctx, wanted, cut[0] if cut else None, principals,
                                       {"plans": plan_ids or None,
                                        "since": cut[0] if cut else None})

    head, lines = run(body)
    if plan_ids and len(head["plans"]) < len(plan_ids) and cut is None:
        missing = [p for p in plan_ids if p not in head["plans"]]
        fail(f"plan(s) not found: {', '.join(missing)}")
    text = "".join(json.dumps(x, ensure_ascii=False, sort_keys=True) + "\n"
                   for x in [head, *lines])
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        out.print(f"{len(lines)} record(s) of {len(head['plans'])} plan(s) written to "
                  f"{escape(str(output))}")


def _cut(text: str) -> tuple[str, datetime]:
    from contracts.trust.chain import plain

    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        fail(f"--since {text!r} is not an ISO 8601 time (2026-01-01T00:00:00Z)", USAGE_ERROR)
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return plain(at), at.astimezone(UTC)


app.command("verify")(verify)
app.command("export")(export)
