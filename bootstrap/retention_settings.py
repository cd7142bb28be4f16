"""RETENTION_* (docs/retention.md, Retention): the policies, where removed plans are
exported, and how often and how much the workers apply them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bootstrap.setting_types import env_float, env_int
from contracts.retention.policies import Policy, parse_policies


@dataclass(frozen=True)
class RetentionSettings:
    policies: tuple[Policy, ...] = ()
    """RETENTION_POLICIES (JSON list, contracts.retention.policies); none: nothing
    expires."""
    export_dir: Path | None = None
    """RETENTION_EXPORT_DIR: where a removal with `export` writes the plans first (audit
    export format); unset: such removals are held."""
    interval_seconds: float = 3600.0
    """RETENTION_INTERVAL_SECONDS: how often one worker (under a lease) runs a pass."""
    batch: int = 100
    """RETENTION_BATCH: plans (letters, violations) per batch."""
    max_batches: int = 100
    """RETENTION_MAX_BATCHES: batches per policy per pass (the next pass goes on)."""


def read_retention() -> RetentionSettings:
    """The environment's; ValueError (one line) naming a bad variable."""
    d = RetentionSettings()
    export = os.environ.get("RETENTION_EXPORT_DIR")
    found = RetentionSettings(
        policies=parse_policies(os.environ.get("RETENTION_POLICIES", "")),
        export_dir=Path(export) if export else None,
        interval_seconds=env_float("RETENTION_INTERVAL_SECONDS", d.interval_seconds),
        batch=env_int("RETENTION_BATCH", d.batch),
        max_batches=env_int("RETENTION_MAX_BATCHES", d.max_batches))
    if found.interval_seconds <= 0 or found.batch <= 0 or found.max_batches <= 0:
        raise ValueError("RETENTION_INTERVAL_SECONDS, RETENTION_BATCH and "
                         "RETENTION_MAX_BATCHES must be positive")
    return found

