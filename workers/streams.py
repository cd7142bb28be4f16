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

from nats.js import JetStreamContext
from nats.js.api import StreamConfig
from nats.js.errors import APIError, NotFoundError, ServiceUnavailableError

from contracts.families import STREAMS, captured
from workers.stream_config import Drift, StreamLimits, plan_update, stream_config

log = logging.getLogger(__name__)


class StreamRefused(Exception):
    """The server refused to create or update a stream (e.g. R3 on a single node);
    `str()` names the stream, what was asked and the server's reason, in one line."""


def stream_configs(limits: StreamLimits | None = None) -> list[StreamConfig]:
    """Each declared stream (contracts.families) with the subjects its families need."""
    limits = limits or StreamLimits()
    return [stream_config(s.name, captured(s), s.duplicate_window, s.description, limits)
            for s in STREAMS]


async def ensure_streams(js: JetStreamContext, limits: StreamLimits | None = None
                         ) -> list[Drift]:
    """Create each missing stream; update an existing one only in the fields the app
    owns (workers.stream_config), logging a WARNING for each difference. Returns them."""
    found: list[Drift] = []
    for config in stream_configs(limits):
        name = config.name or ""
        try:
            found.extend(await _ensure(js, name, config))
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


async def _ensure(js: JetStreamContext, name: str, config: StreamConfig) -> list[Drift]:
    try:
        info = await js.stream_info(name)
    except NotFoundError:
        await js.add_stream(config)
        return []
    update = plan_update(info.config, config)
    for drift in update.drift:
        log.warning("%s", drift.describe(name))
    if update.config is not None:
        await js.update_stream(update.config)
    return list(update.drift)
