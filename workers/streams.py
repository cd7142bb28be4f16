"""Every JetStream stream the system uses, declared in one place.

Defaults suit one machine (file storage, one replica). Production wants R3 and the
server's `sync_interval: always` (deploy/nats-server.conf) so an acked message
survives a power cut; set STREAM_REPLICAS=3 there.
"""

from __future__ import annotations

import os

from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from contracts.correction_subjects import (
    CORRECTIONS_DUPLICATE_WINDOW_SECONDS,
    CORRECTIONS_STREAM,
    CORRECTIONS_STREAM_SUBJECTS,
)
from contracts.invariant_subjects import (
    INVARIANTS_DUPLICATE_WINDOW_SECONDS,
    INVARIANTS_STREAM,
    INVARIANTS_SUBJECTS,
)
from contracts.subjects import (
    DECISIONS_DUPLICATE_WINDOW_SECONDS,
    DECISIONS_STREAM,
    DECISIONS_SUBJECTS,
)


def _durable(name: str, subjects: list[str], duplicate_window: float, replicas: int,
             description: str) -> StreamConfig:
    """Every stream alike: file storage, limits retention, the oldest dropped first."""
    return StreamConfig(
        name=name, subjects=subjects, retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE, discard=DiscardPolicy.OLD,
        duplicate_window=duplicate_window, num_replicas=replicas, description=description)


def stream_configs() -> list[StreamConfig]:
    replicas = int(os.environ.get("STREAM_REPLICAS", "1"))
    return [
        _durable(DECISIONS_STREAM, [DECISIONS_SUBJECTS], DECISIONS_DUPLICATE_WINDOW_SECONDS,
                 replicas, "Decisions recorded by agents, and the recorder's "
                 "persisted/rejected events."),
        _durable(CORRECTIONS_STREAM, list(CORRECTIONS_STREAM_SUBJECTS),
                 CORRECTIONS_DUPLICATE_WINDOW_SECONDS, replicas,
                 "Correction requests and cancels from operators, and every lifecycle and "
                 "attempt transition (corrections.dryrun.* is request-reply, not captured)."),
        _durable(INVARIANTS_STREAM, [INVARIANTS_SUBJECTS], INVARIANTS_DUPLICATE_WINDOW_SECONDS,
                 replicas, "Invariant violations reported by agents, their violated/resolved "
                 "events and the rejected reports."),
    ]


async def ensure_streams(js: JetStreamContext) -> None:
    """Create each stream, or bring an existing one to this configuration."""
    for config in stream_configs():
        try:
            await js.stream_info(config.name or "")
        except NotFoundError:
            await js.add_stream(config)
        else:
            await js.update_stream(config)
