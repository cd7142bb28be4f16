"""Configuration from the environment: the same variables for `agents up`, `agents workers`
and the tests."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw else default


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw else default


@dataclass(frozen=True)
class Settings:
    nats_url: str = "nats://127.0.0.1:4222"
    mongodb_uri: str = "mongodb://127.0.0.1:27017/?directConnection=true"
    mongodb_db: str = "decisions"
    recorder_batch_size: int = 500
    recorder_batch_timeout: float = 0.02
    recorder_parent_wait_seconds: float = 60.0
    recorder_ack_wait_seconds: float = 30.0
    graceful_timeout: float = 15.0
    artifacts_root: Path | None = None

    @classmethod
    def from_env(cls) -> Settings:
        root = os.environ.get("ARTIFACTS_ROOT")
        return cls(
            nats_url=os.environ.get("NATS_URL", cls.nats_url),
            mongodb_uri=os.environ.get("MONGODB_URI", cls.mongodb_uri),
            mongodb_db=os.environ.get("MONGODB_DB", cls.mongodb_db),
            recorder_batch_size=_env_int("RECORDER_BATCH_SIZE", cls.recorder_batch_size),
            recorder_batch_timeout=_env_float("RECORDER_BATCH_TIMEOUT",
                                              cls.recorder_batch_timeout),
            recorder_parent_wait_seconds=_env_float("RECORDER_PARENT_WAIT_SECONDS",
                                                    cls.recorder_parent_wait_seconds),
            recorder_ack_wait_seconds=_env_float("RECORDER_ACK_WAIT_SECONDS",
                                                 cls.recorder_ack_wait_seconds),
            graceful_timeout=_env_float("GRACEFUL_TIMEOUT", cls.graceful_timeout),
            artifacts_root=Path(root) if root else None,
        )
