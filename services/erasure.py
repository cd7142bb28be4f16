"""`agents erase`: remove the free text of a decision, a plan, or every decision that
mentions a reference, and the archived copies of their artifacts, keeping the tree
(docs/retention.md, Erasure; ADR 0034).

The operator is the one whose signature the CLI verified (bootstrap.identity, as for a
violation's resolution), acting only on plans of its projects (`operator_scope`). The
erasure's record says who, when, why and what, but not a reference it was asked to find
(that is the text erased): only its SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from contracts.corrections.revert import archive_folder
from contracts.retention.erasure import ERASED
from contracts.retention.reach import Reach
from contracts.shared.ids import new_id
from contracts.trust.ownership import out_of_scope
from contracts.trust.policy import Identity, principal_name, signature_of


class Erasures(Protocol):
    async def reach(self, *, decision_id: str | None = None,
                    plan_ids: list[str] | None = None, mentions: str | None = None
                    ) -> Reach: ...

    async def erase(self, erasure: dict[str, Any], reach: Reach, now: datetime) -> int: ...

    async def projects(self, plan_ids: list[str]) -> dict[str, str | None]: ...


class Refused(Exception):
    """The operator may not erase here (operator_scope)."""


@dataclass(frozen=True)
class Scope:
    decision_id: str | None = None
    plan_id: str | None = None
    mentions: str | None = None

    def as_document(self) -> dict[str, Any]:
        if self.mentions is not None:
            digest = hashlib.sha256(self.mentions.encode()).hexdigest()
            return {"mentions_sha256": digest}
        return {"decision_id": self.decision_id} if self.decision_id else \
            {"plan_id": self.plan_id}


@dataclass(frozen=True)
class Erased:
    erasure_id: str
    reach: Reach
    records: int
    files_removed: int
    dry_run: bool
    archives_missing: int = 0
    """Correction archives not found under this process's ARCHIVE_ROOT."""


def erasure_body(erasure_id: str, scope: Scope, reason: str) -> bytes:
    """What the operator signs: the erasure, its scope and its reason."""
    return json.dumps({"erasure_id": erasure_id, **scope.as_document(),
                       "reason": reason}).encode()


class ErasureService:
    def __init__(self, erasures: Erasures, archive_root: Path) -> None:
        self._erasures = erasures
        self._archive_root = archive_root

    async def erase(self, scope: Scope, reason: str, identity: Identity, now: datetime, *,
                    erasure_id: str | None = None, dry_run: bool = False) -> Erased:
        """Erase what `scope` reaches (`dry_run`: only say what)."""
        reach = await self._erasures.reach(
            decision_id=scope.decision_id, mentions=scope.mentions,
            plan_ids=[scope.plan_id] if scope.plan_id else None)
        projects = await self._erasures.projects(reach.plan_ids)
        for plan_id in reach.plan_ids:
            refused = out_of_scope(identity, plan_id, projects.get(plan_id))
            if refused is not None:
                raise Refused(str(refused))
        erasure_id = erasure_id or new_id()
        if dry_run:
            return Erased(erasure_id, reach, 0, 0, dry_run=True)
        record = {"_id": erasure_id, **scope.as_document(), "reason": reason,
                  "by": principal_name(identity), "verified": identity is not None,
                  "signature": (s.model_dump() if (s := signature_of(identity)) else None),
                  "at": now, "plan_ids": reach.plan_ids,
                  "decision_ids": reach.decision_ids, "correction_ids": reach.correction_ids,
                  "records_erased": 0}
        records = await self._erasures.erase(record, reach, now)
        files, missing = remove_archived(self._archive_root, reach)
        return Erased(erasure_id, reach, records, files, dry_run=False,
                      archives_missing=missing)


def remove_archived(root: Path, reach: Reach) -> tuple[int, int]:
    """Remove the archived copies of the erased decisions' artifacts and their paths from
    each manifest: (files removed, correction archives not found under `root`, which
    this process cannot reach: the workers' ARCHIVE_ROOT may be another volume)."""
    wanted = set(reach.decision_ids)
    removed = missing = 0
    for plan_id, correction_id in reach.archives:
        folder = root / archive_folder(plan_id, correction_id)
        manifest = folder / "manifest.json"
        try:
            doc = json.loads(manifest.read_text())
        except (OSError, ValueError):
            missing += 1
            continue
        lines = doc.get("artifacts") if isinstance(doc, dict) else None
        for line in lines if isinstance(lines, list) else []:
            if not isinstance(line, dict) or line.get("decision_id") not in wanted:
                continue
            removed += _unlink(folder, line.get("archived_as"))
            line.update({"artifact_path": ERASED, "archived_as": ERASED})
            line.pop("skipped", None)
        _rewrite(manifest, doc)
    return removed, missing


def remove_plan_archives(root: Path, plan_ids: list[str]) -> int:
    """Delete the revert archives of removed plans (`corrections/<plan_id>/`); how many
    folders went."""
    gone = 0
    for plan_id in plan_ids:
        folder = root / "corrections" / plan_id
        if folder.is_dir():
            shutil.rmtree(folder)
            gone += 1
    return gone


def _unlink(folder: Path, archived_as: object) -> int:
    if not isinstance(archived_as, str) or archived_as == ERASED:
        return 0
    path = (folder / archived_as).resolve()
    if not path.is_relative_to(folder.resolve()) or not path.is_file():
        return 0
    path.unlink()
    return 1


def _rewrite(manifest: Path, doc: object) -> None:
    """The manifest again, replaced atomically (a crash leaves the old or the new)."""
    tmp = manifest.with_suffix(".erasing")
    tmp.write_text(json.dumps(doc, indent=2))
    os.replace(tmp, manifest)
