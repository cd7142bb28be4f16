"""What the streams should look like, and how an existing stream is brought toward it.

Pure: builds and compares nats-py `StreamConfig` values, no I/O (workers.streams talks
to the server). Two rules keep a worker from clobbering a stream:

- **Only what the app owns is written.** The app owns the subjects it needs (added,
  never removed), the duplicate window (the effectively-once window publishers rely on)
  and the description. Limits (`max_bytes`, `max_age`, `max_msgs`, `max_msg_size`) are
  the operator's once set: a worker fills in a limit the stream does not have, and
  otherwise keeps the stream's value. Anything else (storage, retention, placement,
  compression, ...) is never touched.
- **Safety only ratchets up.** `num_replicas` is raised, never lowered (a worker started
  without STREAM_REPLICAS must not turn R3 into R1); `discard: new`, `deny_delete` and
  `deny_purge` are set, never cleared.

Every difference that is kept, and every field that is changed, is returned as a
`Drift`, which the caller logs as a WARNING: a drifted stream is a configuration to look
at, not an error.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from nats.js.api import (
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    SubjectTransform,
)

from bootstrap.setting_types import StreamProfile
from bootstrap.settings import Settings

GIB = 1024**3
DAY = 86_400.0


PRODUCTION_REPLICAS = 3
PRODUCTION_MAX_BYTES = 20 * GIB
"""Per stream. JetStream reserves it from the server's `max_file_store` when the stream
is created (three streams: 60 GiB of the template's 200G), and with limits retention
consumed messages stay until `max_age`, so size it to peak volume x max_age."""
PRODUCTION_MAX_AGE = 7 * DAY
"""Messages older than this are removed consumed or not: far above any outage the
workers should ride out (MongoDB holds the record; the stream is the transport)."""
MSG_SIZE_HEADROOM = 64 * 1024
"""max_msg_size = MAX_PAYLOAD_BYTES + this: room for headers (message ID, trace
context), and a body a little over the limit still reaches the consumer, which
dead-letters it with the reason (payload_too_large). Worker events are bounded far
below it (contracts.shared.bounds, lists capped at 100)."""


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """The profile's part of every stream's configuration (unlimited: -1, age 0)."""

    replicas: int = 1
    discard: DiscardPolicy = DiscardPolicy.OLD
    max_bytes: int = -1
    max_age: float = 0.0
    max_msg_size: int = -1
    deny_delete: bool = False
    deny_purge: bool = False

    @classmethod
    def of(cls, profile: StreamProfile, *, replicas: int | None = None,
           max_bytes: int | None = None, max_age_seconds: float | None = None,
           max_payload_bytes: int) -> StreamLimits:
        """The profile's limits; the settings given override its defaults."""
        if profile is StreamProfile.DEVELOPMENT:
            # Development has no limits to override; replicas stay settable (a dev cluster).
            return cls(replicas=replicas or 1)
        return cls(replicas=replicas or PRODUCTION_REPLICAS, discard=DiscardPolicy.NEW,
                   max_bytes=max_bytes or PRODUCTION_MAX_BYTES,
                   max_age=max_age_seconds or PRODUCTION_MAX_AGE,
                   max_msg_size=max_payload_bytes + MSG_SIZE_HEADROOM,
                   deny_delete=True, deny_purge=True)


def limits_for(settings: Settings) -> StreamLimits:
    """What the streams are created with, from STREAM_PROFILE and its overrides."""
    return StreamLimits.of(settings.stream_profile, replicas=settings.stream_replicas,
                           max_bytes=settings.stream_max_bytes,
                           max_age_seconds=settings.stream_max_age_seconds,
                           max_payload_bytes=settings.max_payload_bytes)


def stream_config(name: str, subjects: list[str], duplicate_window: float,
                  description: str, limits: StreamLimits, *,
                  transform: tuple[str, str] | None = None) -> StreamConfig:
    """Every stream alike: file storage, limits retention, the profile's limits; and the
    subject transform that stores a partitioned family by partition, if it has one."""
    return StreamConfig(
        subject_transform=SubjectTransform(src=transform[0], dest=transform[1])
        if transform else None,
        name=name, subjects=subjects, description=description,
        retention=RetentionPolicy.LIMITS, storage=StorageType.FILE,
        duplicate_window=duplicate_window, num_replicas=limits.replicas,
        discard=limits.discard, max_bytes=limits.max_bytes, max_age=limits.max_age,
        max_msg_size=limits.max_msg_size, deny_delete=limits.deny_delete,
        deny_purge=limits.deny_purge)


@dataclass(frozen=True, slots=True)
class Drift:
    """One field where the stream and this worker's configuration differ."""

    field: str
    existing: Any
    wanted: Any
    updated: bool
    """True: the stream is updated to `wanted`; False: its value is kept."""
    why: str

    def describe(self, stream: str) -> str:
        action = f"updated to {self.wanted!r}" if self.updated else f"kept {self.existing!r}"
        return (f"stream {stream}: {self.field} is {self.existing!r}, this worker's "
                f"configuration says {self.wanted!r}: {action} ({self.why})")


@dataclass(frozen=True, slots=True)
class StreamUpdate:
    """What to send the server (None: nothing), and every difference found."""

    config: StreamConfig | None
    drift: tuple[Drift, ...]


LIMITS = ("max_bytes", "max_age", "max_msgs", "max_msg_size")
RATCHETS = ("deny_delete", "deny_purge")
FIXED = ("storage", "retention")
"""Fields the server cannot change on an existing stream."""


def _unlimited(value: Any) -> bool:
    return value is None or value in (-1, 0)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return abs(float(a or 0) - float(b or 0)) < 1e-3
    return bool(a == b)


class _Diff:
    """The changes and drift found so far between `existing` and `wanted`."""

    def __init__(self, existing: StreamConfig, wanted: StreamConfig) -> None:
        self.existing, self.wanted = existing, wanted
        self.changes: dict[str, Any] = {}
        self.drift: list[Drift] = []

    def change(self, name: str, value: Any, why: str) -> None:
        self.changes[name] = value
        self.drift.append(Drift(name, getattr(self.existing, name), value, True, why))

    def keep(self, name: str, why: str) -> None:
        self.drift.append(Drift(name, getattr(self.existing, name),
                                getattr(self.wanted, name), False, why))


def _owned(d: _Diff) -> None:
    have = list(d.existing.subjects or [])
    want = list(d.wanted.subjects or [])
    missing = [s for s in want if s not in have]
    if missing:
        d.change("subjects", have + missing, "subjects the app needs are added")
    extra = [s for s in have if s not in want]
    if extra:
        d.drift.append(Drift("subjects", extra, want, False,
                             "subjects the app does not use are left in place"))
    for name in ("duplicate_window", "description"):
        if not _same(getattr(d.existing, name), getattr(d.wanted, name)):
            d.change(name, getattr(d.wanted, name), "owned by the app")
    if _transform(d.existing) != _transform(d.wanted):
        # The partitions' mapping: from now on each plan is stored in the partition the
        # new count gives it; what the old count stored is drained by its own durables.
        d.change("subject_transform", d.wanted.subject_transform,
                 "the partitions the workers record in (RECORDER_PARTITIONS)")


def _transform(c: StreamConfig) -> tuple[str, str] | None:
    t = c.subject_transform
    return (t.src, t.dest) if t is not None else None


def _ratchets(d: _Diff) -> None:
    have_r, want_r = d.existing.num_replicas or 1, d.wanted.num_replicas or 1
    if want_r > have_r:
        d.change("num_replicas", want_r, "replicas are raised")
    elif want_r < have_r:
        d.keep("num_replicas", "replicas are never lowered: is STREAM_REPLICAS set here?")
    if d.existing.discard != d.wanted.discard:
        if d.wanted.discard == DiscardPolicy.NEW:
            d.change("discard", DiscardPolicy.NEW, "a full stream refuses, never drops")
        else:
            d.keep("discard", "discard: new is never weakened to old")
    for name in RATCHETS:
        want, have = bool(getattr(d.wanted, name)), bool(getattr(d.existing, name))
        if want and not have:
            d.change(name, True, "protection is added")
        elif have and not want:
            d.keep(name, "protection is never removed")


def _limits(d: _Diff) -> None:
    for name in LIMITS:
        have, want = getattr(d.existing, name), getattr(d.wanted, name)
        # No limit wanted (development, or one the profile does not set) is no opinion:
        # the stream's own value is no drift.
        if _same(have, want) or _unlimited(want):
            continue
        if _unlimited(have):
            d.change(name, want, "a limit the stream lacked")
        else:
            d.keep(name, "limits are the operator's once set")
    for name in FIXED:
        if getattr(d.existing, name) != getattr(d.wanted, name):
            d.keep(name, "the server cannot change it")


def plan_update(existing: StreamConfig, wanted: StreamConfig) -> StreamUpdate:
    """`existing` with only the fields the app owns brought to `wanted` (module doc)."""
    d = _Diff(existing, wanted)
    _owned(d)
    _ratchets(d)
    _limits(d)
    config = dataclasses.replace(existing, **d.changes) if d.changes else None
    return StreamUpdate(config, tuple(d.drift))
