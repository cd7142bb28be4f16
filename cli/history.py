"""History read models: `agents plan tree --as-of` and `agents correction diff`.

Both are computed from what the ledger holds (contracts.corrections.as_of and .diff); this
module only loads it and prints it. `plan tree` and `correction` register the entry points.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from cli.context import Ctx, parse_id, run
from cli.errors import USAGE_ERROR, fail
from cli.render import JsonFlag, clip, dump, emit_json, out, short, status_text, when

if TYPE_CHECKING:
    from contracts.corrections.as_of import Cut
    from contracts.corrections.diff import CorrectionDiff, DecisionBrief
    from contracts.corrections.record import Correction
    from contracts.decisions.model import Decision

AS_OF_HELP = ("Show the tree as it was then: an ISO time (UTC if no offset), or a correction "
              "ID of this plan (the tree that correction produced).")
BEFORE_HELP = "With --as-of CORRECTION_ID: the tree just before that correction was applied."


def parse_as_of(value: str) -> str | datetime:
    """A correction ID (upper-cased, or its last characters) or a UTC time; anything
    else is a usage error."""
    from contracts.shared.views import suffix_of
    from services.tree_model import moment_of

    try:
        return moment_of(value)
    except ValueError:
        if suffix_of(value) is not None:
            return value.strip()
        fail(f"--as-of {value!r} is neither a correction ID nor an ISO time "
             "(e.g. 2026-11-30T12:00:00Z)", USAGE_ERROR)


async def moment_id(ctx: Ctx, moment: str | datetime) -> str | datetime:
    """A correction named by its last characters, resolved to its whole ID."""
    from contracts.shared.views import IdKind
    from services.id_lookup import IdNotUsable

    if isinstance(moment, datetime):
        return moment
    try:
        return await ctx.resolve(moment, IdKind.CORRECTION)
    except IdNotUsable as exc:
        fail(f"--as-of {moment!r} is neither a correction ID nor an ISO time "
             f"(e.g. 2026-11-30T12:00:00Z): {exc}", USAGE_ERROR)


def cut_moment(cut: Cut, decisions: list[Decision], corrections: list[Correction]
               ) -> datetime | None:
    """The time a cut stands for (child plans are shown with their status then): a
    time's own; a correction's, when it was applied (just before, for --before); else
    the last decision's time at the cut."""
    from contracts.corrections.as_of import TimeCut, applied_at

    if isinstance(cut, TimeCut):
        return cut.at
    seq = {d.decision_id: d.sequence_number for d in decisions}
    for c in corrections:
        at = applied_at(c)
        made = seq.get(c.new_decision_id or "")
        if at is not None and made == cut.sequence:
            return at
        if at is not None and made == cut.sequence + 1:
            return at - timedelta(milliseconds=1)
    times = [d.created_at for d in decisions
             if d.sequence_number is not None and d.sequence_number <= cut.sequence]
    return max(times, default=None)


def resolve_cut(as_of: str | datetime, before: bool, decisions: list[Decision],
                corrections: list[Correction]) -> Cut:
    """The cut `--as-of` names, failing with one line when it names nothing here."""
    from contracts.corrections.as_of import TimeCut, cut_of_correction

    if isinstance(as_of, datetime):
        if before:
            fail("--before goes with --as-of CORRECTION_ID, not a time", USAGE_ERROR)
        return TimeCut(as_of)
    found = next((c for c in corrections if c.correction_id == as_of), None)
    if found is None:
        fail(f"no correction {as_of} is recorded for this plan")
    try:
        return cut_of_correction(found, {d.decision_id: d for d in decisions}, before=before)
    except ValueError as exc:
        fail(str(exc))


def as_of(decisions: list[Decision], corrections: list[Correction], cut: Cut
          ) -> tuple[list[Decision], list[Correction]]:
    """The decisions current at `cut` and the corrections applied by then."""
    from services.tree_model import cut_as_of

    return cut_as_of(decisions, corrections, cut)


def cut_text(cut: Cut) -> str:
    from contracts.corrections.as_of import SequenceCut

    if isinstance(cut, SequenceCut):
        return f"as of sequence #{cut.sequence}"
    return f"as of {cut.at.isoformat()}"


def cut_json(cut: Cut) -> dict[str, object]:
    from contracts.corrections.as_of import SequenceCut

    if isinstance(cut, SequenceCut):
        return {"sequence_number": cut.sequence}
    return {"time": cut.at.isoformat()}


# --- agents correction diff ----------------------------------------------------------


def diff(
    correction_id: Annotated[str, typer.Argument(help="The correction (ULID).")],
    as_json: JsonFlag = False,
) -> None:
    """What a correction changed: decisions superseded and added, child plans rolled back
    or spawned, and the archive of the artifacts."""
    correction_id = parse_id(correction_id, "correction")

    async def body(ctx: Ctx) -> None:
        from contracts.shared.views import IdKind

        result = await load_diff(ctx, await ctx.resolve(correction_id, IdKind.CORRECTION))
        if as_json:
            emit_json(dump(result))
            return
        print_diff(result)

    run(body)


async def load_diff(ctx: Ctx, correction_id: str) -> CorrectionDiff:
    from services.read_model import correction_diff_of

    found = await correction_diff_of(ctx.reads, correction_id)
    if found is None:
        fail(f"no correction {correction_id} is recorded")
    return found


def _brief(sign: str, b: DecisionBrief) -> str:
    kind = b.decision_type.value if b.decision_type else "[dim]not recorded[/]"
    seq = "" if b.sequence_number is None else f"#{b.sequence_number} "
    plan = f" plan {short(b.plan_id)}" if b.plan_id else ""
    return (f"  {sign} {kind} {escape(clip(b.chosen_option or ''))}  "
            f"[dim]{seq}{b.decision_id}{plan}[/]")


def print_diff(d: CorrectionDiff) -> None:
    out.print(f"[bold]correction {d.correction_id}[/] {d.mode.value} of "
              f"{d.target_decision_id} in plan {d.plan_id}: {status_text(d.status.value)}"
              + (f" at {when(d.applied_at)}" if d.applied_at else ""))
    if d.applied_at is None:
        out.print("  [dim]not applied: it changed nothing[/]")
        return
    out.print(f"[bold]superseded[/] ({d.superseded_count})")
    for b in d.superseded:
        out.print(_brief("[red]-[/]", b))
    if d.superseded_count > len(d.superseded):
        out.print(f"  [dim]… {d.superseded_count - len(d.superseded)} more "
                  "(agents correction show --json)[/]")
    out.print(f"[bold]added[/] ({len(d.added)})")
    for b in d.added:
        out.print(_brief("[green]+[/]", b))
    for p in d.child_plans_rolled_back:
        out.print(f"child plan rolled back: {p}")
    if d.child_plans_rolled_back_count > len(d.child_plans_rolled_back):
        out.print(f"  [dim]… {d.child_plans_rolled_back_count - len(d.child_plans_rolled_back)}"
                  " more[/]")
    for p in d.child_plans_spawned:
        out.print(f"child plan spawned: {p}")
    if d.archived_artifacts_path:
        out.print(f"archive: {escape(d.archived_artifacts_path)}")
        out.print(f"manifest: {escape(d.manifest_path or '')}")
    if d.archive_not_copied_count:
        out.print(f"[bold]not copied[/] ({d.archive_not_copied_count})")
    for n in d.archive_not_copied:
        out.print(f"  [yellow]![/] {escape(clip(n.artifact_path, 100))}: "
                  f"{escape(clip(n.skipped, 300))}")
    if d.archive_not_copied_count > len(d.archive_not_copied):
        out.print(f"  [dim]… {d.archive_not_copied_count - len(d.archive_not_copied)} "
                  "more (the manifest lists them all)[/]")
