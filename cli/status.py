"""`agents status`: the stack at a glance.

What an operator on call asks first: are the workers up, are the consumers keeping up
(pending, waiting for an ack, redelivered), is anything stuck (corrections not ended,
and since when), and what needs a person (dead letters, open violations). JetStream
answers the first two, the ledger's read port the rest (`status`, from MongoDB's
counts: store/status.py); both are read-only.

Exit code 0 when the stack looks healthy, 1 when it could not be read, and 5 when it
was read and something needs attention (no live worker, a dead letter, an open error
violation), so a script or a cron job can alert on it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer

from cli.context import Ctx, run
from cli.render import JsonFlag, emit_json, out, when

if TYPE_CHECKING:
    from nats.js import JetStreamContext

    from contracts.shared.counts import LedgerStatus

EXIT_ATTENTION = 5


def status(as_json: JsonFlag = False) -> None:
    """Workers, streams and consumers (lag), corrections in flight, dead letters, violations."""

    async def body(ctx: Ctx) -> int:
        streams = await _streams(await ctx.jetstream())
        ledger = await ctx.reads.status(datetime.now(UTC))
        attention = _attention(ledger)
        if as_json:
            emit_json({"streams": streams, **_ledger_json(ledger), "attention": attention})
        else:
            _show(streams, ledger, attention)
        return EXIT_ATTENTION if attention else 0

    code = run(body)
    if code:
        raise typer.Exit(code)


async def _streams(js: JetStreamContext) -> list[dict[str, Any]]:
    out = []
    for info in await js.streams_info():
        name = info.config.name or ""
        consumers = [{
            "name": c.name, "pending": c.num_pending or 0,
            "ack_pending": c.num_ack_pending, "redelivered": c.num_redelivered,
            "waiting": c.num_waiting or 0,
        } for c in await js.consumers_info(name)]
        out.append({"name": name, "messages": info.state.messages, "bytes": info.state.bytes,
                    "replicas": info.config.num_replicas,
                    "consumers": sorted(consumers, key=lambda c: str(c["name"]))})
    return sorted(out, key=lambda s: str(s["name"]))


def _attention(ledger: LedgerStatus) -> list[str]:
    """Each thing a person should look at, in one line."""
    why = []
    if not any(w.alive for w in ledger.workers):
        why.append("no live worker (start one: agents workers)")
    if ledger.dead_letters:
        why.append(f"{ledger.dead_letters} dead letter(s) (agents dead-letters list)")
    if ledger.violations_open.get("error"):
        why.append(f"{ledger.violations_open['error']} open error violation(s) block "
                   "Execute-phase decisions (agents invariant violations)")
    return why


def _ledger_json(ledger: LedgerStatus) -> dict[str, Any]:
    return {
        "workers": [{"worker_id": w.worker_id, "host": w.host, "pid": w.pid,
                     "started_at": w.started_at, "seen_at": w.seen_at, "alive": w.alive}
                    for w in ledger.workers],
        "corrections_in_flight": ledger.corrections_in_flight,
        "oldest_in_flight_at": ledger.oldest_in_flight_at,
        "dead_letters": ledger.dead_letters,
        "dead_letters_by_rule": ledger.dead_letters_by_rule,
        "violations_open": ledger.violations_open,
    }


def _show(streams: list[dict[str, Any]], ledger: LedgerStatus, attention: list[str]) -> None:
    from rich.table import Table

    alive = [w for w in ledger.workers if w.alive]
    out.print(f"[bold]workers[/]: {len(alive)} alive"
              + (f", {len(ledger.workers) - len(alive)} expired"
                     if len(alive) < len(ledger.workers) else ""))
    for w in ledger.workers:
        out.print(f"  {w.worker_id}  pid {w.pid} on {w.host}  since {when(w.started_at)}"
                  f"  {'seen ' + when(w.seen_at) if w.alive else '[red]expired[/]'}")
    table = Table("stream", "consumer", "pending", "ack pending", "redelivered", "waiting",
                  title="streams and consumers", title_justify="left")
    for s in streams:
        table.add_row(f"{s['name']} ({s['messages']} msgs, R{s['replicas']})", "", "", "",
                      "", "")
        for c in s["consumers"]:
            table.add_row("", str(c["name"]), str(c["pending"]), str(c["ack_pending"]),
                          str(c["redelivered"]), str(c["waiting"]))
    out.print(table)
    flight = ", ".join(f"{n} {s}" for s, n in sorted(ledger.corrections_in_flight.items()))
    out.print(f"[bold]corrections in flight[/]: {flight or 'none'}"
              + (f" (oldest requested {when(ledger.oldest_in_flight_at)})"
                     if ledger.oldest_in_flight_at else ""))
    rules = ", ".join(f"{n} {r}" for r, n in sorted(ledger.dead_letters_by_rule.items()))
    out.print(f"[bold]dead letters[/]: {ledger.dead_letters}"
              + (f" ({rules})" if rules else ""))
    open_ = ", ".join(f"{n} {s}" for s, n in sorted(ledger.violations_open.items()))
    out.print(f"[bold]open violations[/]: {open_ or 'none'}")
    for line in attention:
        out.print(f"[yellow]attention:[/] {line}")
