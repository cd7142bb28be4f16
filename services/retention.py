"""Applying the retention policies in bounded batches (docs/retention.md, Retention):
what `agents retention run [--dry-run]` and the workers' retention loop both do.

A pass takes each policy in turn, `batch` plans (or letters, or violations) at a time,
and at most `max_batches` batches per policy, so one pass is bounded whatever is due;
the next pass goes on where this one stopped. A plan removal goes family by family
(contracts.retention.policies); with `export` set, a family's records are written to
RETENTION_EXPORT_DIR in the audit export format before the transaction that deletes
them (no directory: the family is held, never removed unexported).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from contracts.retention.policies import Action, Families, Policy, Records, removable_families
from contracts.retention.reach import Reach
from contracts.shared.ids import new_id
from contracts.trust.audit_lines import header
from contracts.trust.chain import plain
from services.erasure import remove_archived, remove_plan_archives

RETENTION_BY = "retention"
"""Who an erasure or removal by a policy names: the ledger itself, under a policy."""


class RetentionRecords(Protocol):
    async def due_plans(self, policy: Policy, cut: datetime, limit: int,
                        after: str | None = None) -> list[str]: ...
    async def families(self, plan_ids: list[str]) -> dict[str, list[str]]: ...
    async def remove(self, plan_ids: list[str], log: dict[str, Any]) -> dict[str, int]: ...
    async def mark_erased(self, plan_ids: list[str], policy: str, now: datetime
                          ) -> None: ...
    async def old_dead_letters(self, cut: datetime, limit: int) -> list[str]: ...
    async def remove_dead_letters(self, ids: list[str], log: dict[str, Any]) -> int: ...
    async def old_resolutions(self, cut: datetime, limit: int) -> list[dict[str, Any]]: ...
    async def erase_details(self, docs: list[dict[str, Any]], stamp: dict[str, Any]
                            ) -> int: ...
    async def count_old(self, records: Records, cut: datetime) -> int: ...


class PlanErasures(Protocol):
    async def reach(self, *, decision_id: str | None = None,
                    plan_ids: list[str] | None = None, mentions: str | None = None
                    ) -> Reach: ...
    async def erase(self, erasure: dict[str, Any], reach: Reach, now: datetime) -> int: ...


class AuditExport(Protocol):
    async def export(self, plan_ids: list[str], cut: str | None = None
                     ) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]: ...


@dataclass
class Outcome:
    """What one policy did (or, in a dry run, would do) in one pass."""

    policy: Policy
    due: int = 0
    done: int = 0
    held: int = 0
    """Due plans kept: a plan of their family is not due, or no export directory."""
    exported: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"policy": self.policy.name, "describes": self.policy.describe(),
                "due": self.due, "done": self.done, "held": self.held,
                "exported": self.exported}


@dataclass(frozen=True)
class Ports:
    records: RetentionRecords
    erasures: PlanErasures
    audit: AuditExport
    archive_root: Path | None = None
    """The revert archives (ARCHIVE_ROOT): erased plans' copies and removed plans'
    folders go too."""


class RetentionService:
    def __init__(self, ports: Ports, policies: tuple[Policy, ...], *,
                 export_dir: Path | None, batch: int = 100, max_batches: int = 100) -> None:
        self._p = ports
        self.policies = policies
        self._export_dir = export_dir
        self._batch = batch
        self._max_batches = max_batches

    async def run(self, now: datetime, *, dry_run: bool = False) -> list[Outcome]:
        """One pass over every policy."""
        return [await self._one(p, now, dry_run) for p in self.policies]

    async def _one(self, policy: Policy, now: datetime, dry_run: bool) -> Outcome:
        cut = now - timedelta(days=policy.older_than_days)
        out = Outcome(policy)
        if policy.records is Records.DEAD_LETTERS:
            await self._letters(policy, cut, now, out, dry_run)
        elif policy.records is Records.RESOLVED_VIOLATIONS:
            await self._violations(cut, now, policy, out, dry_run)
        else:
            await self._plans(policy, cut, now, out, dry_run)
        return out

    async def _plans(self, policy: Policy, cut: datetime, now: datetime, out: Outcome,
                     dry_run: bool) -> None:
        after: str | None = None
        for _ in range(self._max_batches):
            due = await self._p.records.due_plans(policy, cut, self._batch, after)
            if not due:
                return
            after = due[-1]
            out.due += len(due)
            if policy.action is Action.ERASE:
                out.done += len(due) if dry_run else await self._erase(policy, due, now)
                continue
            grouped = removable_families(due, await self._p.records.families(due))
            out.held += len(grouped.held)
            await self._remove(policy, grouped, now, out, dry_run)

    async def _erase(self, policy: Policy, due: list[str], now: datetime) -> int:
        """One erasure for the batch's plans (its record lists them), then each plan
        marked so the policy does not find it again."""
        reach = await self._p.erasures.reach(plan_ids=due)
        record = {"_id": new_id(), "plan_ids": due, "reason": f"retention policy "
                  f"{policy.name}: {policy.describe()}", "by": RETENTION_BY,
                  "verified": False, "signature": None, "at": now,
                  "decision_ids": reach.decision_ids,
                  "correction_ids": reach.correction_ids, "records_erased": 0}
        await self._p.erasures.erase(record, reach, now)
        if self._p.archive_root is not None:
            remove_archived(self._p.archive_root, reach)
        await self._p.records.mark_erased(due, policy.name, now)
        return len(due)

    async def _remove(self, policy: Policy, grouped: Families, now: datetime, out: Outcome,
                      dry_run: bool) -> None:
        """The batch's whole families: exported (when the policy says so), then removed
        in one transaction."""
        plans = [p for family in grouped.removable for p in family]
        if not plans:
            return
        if dry_run:
            out.done += len(plans)
            return
        export = None
        if policy.export:
            if self._export_dir is None:
                out.held += len(plans)
                return
            export = await self._export(policy, plans, now)
            out.exported.append(str(export))
        log = {"_id": new_id(), "policy": policy.name, "action": "remove", "at": now,
               "plan_ids": plans, "export": str(export) if export else None}
        await self._p.records.remove(plans, log)
        if self._p.archive_root is not None:
            remove_plan_archives(self._p.archive_root, plans)
        out.done += len(plans)

    async def _export(self, policy: Policy, plans: list[str], now: datetime) -> Path:
        """The plans' records as an audit export, fsynced before anything is removed."""
        entries, lines = await self._p.audit.export(plans)
        head = header(exported_at=plain(now), parameters={"retention_policy": policy.name,
                                                          "plans": plans},
                      principals=[], plans=entries)
        assert self._export_dir is not None
        self._export_dir.mkdir(parents=True, exist_ok=True)
        path = self._export_dir / f"retention-{policy.name}-{plans[0]}.jsonl"
        with path.open("w") as f:
            for line in (head, *lines):
                f.write(json.dumps(line, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return path

    async def _letters(self, policy: Policy, cut: datetime, now: datetime, out: Outcome,
                       dry_run: bool) -> None:
        if dry_run:
            out.due = out.done = await self._p.records.count_old(policy.records, cut)
            return
        for _ in range(self._max_batches):
            ids = await self._p.records.old_dead_letters(cut, self._batch)
            if not ids:
                return
            out.due += len(ids)
            out.done += await self._p.records.remove_dead_letters(
                ids, {"_id": new_id(), "policy": policy.name, "action": "remove",
                      "at": now, "dead_letters": len(ids)})

    async def _violations(self, cut: datetime, now: datetime, policy: Policy, out: Outcome,
                          dry_run: bool) -> None:
        if dry_run:
            out.due = out.done = await self._p.records.count_old(policy.records, cut)
            return
        for _ in range(self._max_batches):
            docs = await self._p.records.old_resolutions(cut, self._batch)
            if not docs:
                return
            out.due += len(docs)
            stamp = {"erased.by": RETENTION_BY, "erased.at": now,
                     "erased.reason": f"retention policy {policy.name}"}
            out.done += await self._p.records.erase_details(docs, stamp)
