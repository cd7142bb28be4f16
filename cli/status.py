"""`agents status`: the stack at a glance.

What an operator on call asks first: are the workers up, are the consumers keeping up
(pending, waiting for an ack, redelivered), is anything stuck (corrections not ended,
and since when), and what needs a person (dead letters, open violations). JetStream
answers the first two, the ledger's read port the rest (`status`, from MongoDB's
counts: store/status.py); both are read-only.

Exit code 0 when the stack looks healthy, 1 when it could not be read, and 5 when it
was read and something needs attention (no live worker, a dead letter not discarded,
an open error violation, a correction FAILED in the last 24 hours, one not ended five
minutes after its request, requests waiting in the stream), so a script or a cron job
can alert on it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer

from cli.context import Ctx, run
from cli.render import JsonFlag, emit_json, out, table, when

if TYPE_CHECKING:
    from nats.js import JetStreamContext

    from contracts.shared.counts import LedgerStatus

EXIT_ATTENTION = 5


def status(as_json: JsonFlag = False) -> None:
    """Workers, streams and consumers (lag), corrections in flight, dead letters, violations."""

    async def body(ctx: Ctx) -> int:
        streams = await _streams(await ctx.jetstream())
        now = datetime.now(UTC)
        ledger = await ctx.reads.status(now)
        attention = _attention(ledger, now, _queued(streams))
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


def _queued(streams: list[dict[str, Any]]) -> int:
    """Correction requests the request consumer has not been delivered yet."""
    from contracts.corrections.subjects import CORRECTIONS_STREAM, CORRECTOR_DURABLE

    return sum(int(c["pending"]) for s in streams if s["name"] == CORRECTIONS_STREAM
               for c in s["consumers"] if c["name"] == CORRECTOR_DURABLE)


def _attention(ledger: LedgerStatus, now: datetime, queued: int = 0) -> list[str]:
    """Each thing a person should look at, in one line."""
    from contracts.shared.counts import IN_FLIGHT_TOO_LONG

    why = []
    if not any(w.alive for w in ledger.workers):
        why.append("no live worker (start one: agents workers)")
    if queued:
        why.append(f"{queued} correction request(s) wait in the stream, not taken up by a "
                   "worker (agents correction list)")
    if ledger.oldest_in_flight_at and now - ledger.oldest_in_flight_at > IN_FLIGHT_TOO_LONG:
        minutes = int((now - ledger.oldest_in_flight_at).total_seconds() // 60)
        why.append(f"a correction not ended {minutes} min after its request (agents "
                   "correction list --status pending; is a worker running its plan?)")
    if ledger.failed_recently:
        why.append(f"{ledger.failed_recently} correction(s) FAILED in the last 24 h (agents "
                   "correction list --status failed; agents correction retry ID)")
    if ledger.dead_letters:
        why.append(f"{ledger.dead_letters} dead letter(s) (agents dead-letters list; retry "
                   "or discard them)")
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
        "corrections_failed": ledger.corrections_failed,
        "corrections_failed_last_24h": ledger.failed_recently,
        "last_failed_at": ledger.last_failed_at,
        "dead_letters": ledger.dead_letters,
        "dead_letters_by_rule": ledger.dead_letters_by_rule,
        "violations_open": ledger.violations_open,
    }


def _show(streams: list[dict[str, Any]], ledger: LedgerStatus, attention: list[str]) -> None:
    alive = [w for w in ledger.workers if w.alive]
    out.print(f"[bold]workers[/]: {len(alive)} alive"
              + (f", {len(ledger.workers) - len(alive)} expired"
                     if len(alive) < len(ledger.workers) else ""))
    for w in ledger.workers:
        out.print(f"  {w.worker_id}  pid {w.pid} on {w.host}  since {when(w.started_at)}"
                  f"  {'seen ' + when(w.seen_at) if w.alive else '[red]expired[/]'}")
    rows = []
    for s in streams:
        rows.append([f"{s['name']} ({s['messages']} msgs, R{s['replicas']})", "", "", "",
                     "", ""])
        rows += [["", str(c["name"]), str(c["pending"]), str(c["ack_pending"]),
                  str(c["redelivered"]), str(c["waiting"])] for c in s["consumers"]]
    table(["stream", "consumer", "pending", "ack pending", "redelivered", "waiting"], rows,
          title="streams and consumers")
    flight = ", ".join(f"{n} {s}" for s, n in sorted(ledger.corrections_in_flight.items()))
    out.print(f"[bold]corrections in flight[/]: {flight or 'none'}"
              + (f" (oldest requested {when(ledger.oldest_in_flight_at)})"
                     if ledger.oldest_in_flight_at else ""))
    out.print(f"[bold]corrections failed[/]: {ledger.corrections_failed}"
              + (f" ({ledger.failed_recently} in the last 24 h, last "
                 f"{when(ledger.last_failed_at)})" if ledger.corrections_failed else ""))
    rules = ", ".join(f"{n} {r}" for r, n in sorted(ledger.dead_letters_by_rule.items()))
    out.print(f"[bold]dead letters[/]: {ledger.dead_letters}"
              + (f" ({rules})" if rules else ""))
    open_ = ", ".join(f"{n} {s}" for s, n in sorted(ledger.violations_open.items()))
    out.print(f"[bold]open violations[/]: {open_ or 'none'}")
    for line in attention:
        out.print(f"[yellow]attention:[/] {line}")
