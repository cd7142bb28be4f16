"""Every JetStream stream the system uses (declared with its message families in
contracts.families), created or brought toward that declaration without clobbering
what an operator set.

The development profile (default) suits one machine: file storage, one replica, no
limits. Production (STREAM_PROFILE=production) adds R3, limits, `discard: new` and
deny delete/purge (workers.stream_config), with the server's `sync_interval: always`
(deploy/nats-server.conf) so an acked message survives a power cut.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from nats.js import JetStreamContext
from nats.js.api import StreamConfig
from nats.js.errors import APIError, NotFoundError, ServiceUnavailableError

from contracts.families import STREAMS, captured, partitioned
from contracts.shared.families import MessageFamily
from contracts.shared.partitions import transform
from workers.stream_config import Drift, StreamLimits, plan_update, stream_config

log = logging.getLogger(__name__)


class StreamRefused(Exception):
    """The server refused to create or update a stream (e.g. R3 on a single node);
    `str()` names the stream, what was asked and the server's reason, in one line."""


def stream_configs(limits: StreamLimits | None = None,
                   partitions: Callable[[MessageFamily], int] | None = None
                   ) -> list[StreamConfig]:
    """Each declared stream (contracts.families) with the subjects its families need,
    and the transform storing its partitioned family by partition (`partitions`: how
    many each family has; none: one, nothing rewritten)."""
    limits = limits or StreamLimits()
    out = []
    for s in STREAMS:
        family = partitioned(s)
        n = partitions(family) if family is not None and partitions is not None else 1
        out.append(stream_config(s.name, captured(s), s.duplicate_window, s.description,
                                 limits,
                                 transform=transform(family.name, n) if family else None))
    return out


async def ensure_streams(js: JetStreamContext, limits: StreamLimits | None = None,
                         partitions: Callable[[MessageFamily], int] | None = None
                         ) -> list[Drift]:
    """Create each missing stream; update an existing one only in the fields the app
    owns (workers.stream_config), logging a WARNING for each difference. Returns them.
    Without `partitions`, an existing stream keeps its partitions as they are (only the
    workers say how many there are)."""
    found: list[Drift] = []
    for config in stream_configs(limits, partitions):
        name = config.name or ""
        try:
            found.extend(await _ensure(js, name, config, keep_transform=partitions is None))
        except APIError as exc:
            # Not found, or JetStream unavailable (a leader election): not the stream's
            # configuration; the caller retries or the start fails as for any outage.
            if isinstance(exc, NotFoundError | ServiceUnavailableError):
                raise
            raise StreamRefused(
                f"nats-server refused stream {name} (num_replicas {config.num_replicas}, "
                f"discard {config.discard}, max_bytes {config.max_bytes}): "
                f"{exc.description or exc}; check STREAM_PROFILE / STREAM_REPLICAS / "
                f"STREAM_MAX_BYTES against the server (one node takes only R1)") from None
    return found


async def _ensure(js: JetStreamContext, name: str, config: StreamConfig, *,
                  keep_transform: bool) -> list[Drift]:
    try:
        info = await js.stream_info(name)
    except NotFoundError:
        await js.add_stream(config)
        return []
    if keep_transform:
        config.subject_transform = info.config.subject_transform
    update = plan_update(info.config, config)
    for drift in update.drift:
        log.warning("%s", drift.describe(name))
    if update.config is not None:
        await js.update_stream(update.config)
    return list(update.drift)
