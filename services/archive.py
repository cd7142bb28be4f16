"""A revert's archive on disk: the manifest of every affected artifact, and copies.

Written *before* the revert's transaction, into a folder named by the correction,
so a retry overwrites the same place and a crash leaves at worst a folder whose
correction never applied (it is removed when the correction ends FAILED). Files are
copied only from under ARTIFACTS_ROOT: a recorded path is untrusted input, and an
absolute path or '..' elsewhere must not make the worker copy arbitrary files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from contracts.correction_plan import MANIFEST_NAME, RevertPlan, archive_folder


class Archive:
    def __init__(self, archive_root: Path, artifacts_root: Path | None = None) -> None:
        self.archive_root = archive_root
        self.artifacts_root = artifacts_root.resolve() if artifacts_root else None

    def folder(self, plan_id: str, correction_id: str) -> Path:
        return self.archive_root / archive_folder(plan_id, correction_id)

    def write(self, plan: RevertPlan) -> str:
        """Copy what exists, write the manifest; return the folder's absolute path."""
        folder = self.folder(plan.plan_id, plan.correction_id)
        folder.mkdir(parents=True, exist_ok=True)
        entries = []
        for entry in plan.manifest:
            source = self._source(entry.artifact_path)
            copied = source is not None and source.is_file()
            if copied and source is not None:
                dest = folder / entry.archived_as
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, dest)
            entries.append({**entry.model_dump(mode="json"), "copied": copied})
        manifest = {
            "correction_id": plan.correction_id, "plan_id": plan.plan_id,
            "target_decision_id": plan.target_decision_id,
            "new_decision_id": plan.new_decision.decision_id,
            "superseded_ids": plan.supersede_ids,
            "child_plans_rolled_back": plan.child_plans_to_roll_back,
            "artifacts": entries,
        }
        tmp = folder / (MANIFEST_NAME + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=2))
        tmp.replace(folder / MANIFEST_NAME)  # a reader never sees half a manifest
        return str(folder.resolve())

    def remove(self, plan_id: str, correction_id: str) -> None:
        shutil.rmtree(self.folder(plan_id, correction_id), ignore_errors=True)

    def _source(self, artifact_path: str) -> Path | None:
        if self.artifacts_root is None:
            return None
        path = Path(artifact_path)
        candidate = (path if path.is_absolute() else self.artifacts_root / path).resolve()
        if not candidate.is_relative_to(self.artifacts_root):
            return None
        return candidate
