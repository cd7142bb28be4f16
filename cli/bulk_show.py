"""What `agents bulk` prints: a preview's sums, a batch's progress, the list of batches."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape

from cli.render import dump, out, risk_text, seconds, status_text, table, when

if TYPE_CHECKING:
    from contracts.bulk.model import BulkBatch, BulkItem
    from contracts.bulk.preview import BulkPreview

ITEMS_SHOWN = 30
"""Items a text view lists (all of them with --json)."""


def show_preview(p: BulkPreview) -> None:
    out.print(f"dry run {p.mode.value} of every match (nothing was changed)")
    out.print(f"matches: {p.matches} decision(s) in {p.plans} plan(s)")
    out.print(f"would request: {p.to_request} correction(s)"
              + (f"; skipped: {p.covered} covered, {p.superseded} superseded, "
                 f"{p.refused} out of scope"
                 if p.covered or p.superseded or p.refused else ""))
    out.print(f"risk: {risk_text(p.risk.value)} (low {p.risk_counts.get('low', 0)}, "
              f"medium {p.risk_counts.get('medium', 0)}, high {p.risk_counts.get('high', 0)})")
    out.print(f"affected decisions: {p.affected_decisions}")
    out.print(f"affected files: {p.affected_files}")
    for path in p.files[:10]:
        out.print(f"  {escape(path)}")
    if p.affected_files > 10:
        out.print(f"  … {p.affected_files - 10} more (--json lists {len(p.files)})")
    out.print(f"child plans: {p.child_plans}")
    out.print(f"estimated recompute time: {seconds(p.estimated_recompute_time_seconds)}")
    if p.conflicts_count:
        out.print(f"conflicts: {p.conflicts_count} match(es) inside another's subtree")
        for c in p.conflicts[:10]:
            out.print(f"  {c.decision_id} inside {c.covered_by}")
    if p.exceeded:
        out.print(f"[yellow]warning:[/] {p.exceeded} match(es) reach more decisions than "
                  "CORRECTIONS_MAX_DECISIONS; their corrections would fail")
    _items(p.items)


def _items(items: list[BulkItem]) -> None:
    table(["decision", "plan", "state", "correction", "note"],
          [[i.decision_id, i.plan_id, status_text(i.state.value), i.correction_id,
            escape(i.note or "")] for i in items[:ITEMS_SHOWN]], ids_in={0, 1, 3})
    if len(items) > ITEMS_SHOWN:
        out.print(f"[dim]… {len(items) - ITEMS_SHOWN} more item(s) (--json lists all)[/]")


def batch_json(b: BulkBatch) -> Any:
    return {**dump(b), "counts": b.counts(), "summary": b.filter.described()}


def show_batch(b: BulkBatch) -> None:
    out.print(f"bulk batch {b.batch_id}  {status_text(b.state.value)}")
    out.print(f"{b.mode.value} of {escape(b.filter.described())}; reason: {escape(b.reason)}")
    out.print(f"operator: {escape(b.operator or '(unsigned)')} ({escape(b.requested_by)}); "
              f"requested {when(b.created_at)}, updated {when(b.updated_at)}")
    out.print("items: " + ", ".join(f"{k} {v}" for k, v in b.counts().items()))
    _items(b.items)


def show_batches(found: list[BulkBatch]) -> None:
    if not found:
        out.print("no bulk batches")
        return
    table(["batch", "state", "mode", "filter", "items", "when"],
          [[b.batch_id, status_text(b.state.value), b.mode.value,
            escape(b.filter.described()),
            ", ".join(f"{k} {v}" for k, v in b.counts().items()), when(b.created_at)]
           for b in found], ids_in={0})
