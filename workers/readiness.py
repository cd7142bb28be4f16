"""What the worker's /readyz says, and starting the health endpoint that says it."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bootstrap.reachability import StartupFailed, describe
from bootstrap.setting_types import parse_addr
from workers.connections import NatsLink
from workers.health import HealthServer, Readiness
from workers.metrics import Metrics

if TYPE_CHECKING:
    from workers.runtime import Runtime

log = logging.getLogger(__name__)


def readiness(runtime: Runtime, link: NatsLink) -> Readiness:
    """Ready: NATS connected, MongoDB answered a ping lately, every consumer pulling from
    its durable as declared (one deleted or changed under it fails the check until it is
    re-created and seen back: workers.consumer_watch)."""

    def nats_check() -> str | None:
        return link.problem()

    def mongo_check() -> str | None:
        if runtime.mongo_watch is None:
            return "connecting"
        return runtime.mongo_watch.problem()

    def consumers_check() -> str | None:
        if not runtime.consuming:
            return "not started" if not runtime.pullers else "stopping"
        stopped = sum(not p.running for p in runtime.pullers)
        if stopped:
            return f"{stopped} of {len(runtime.pullers)} stopped"
        problems = [p.problem for p in runtime.pullers if p.problem]
        return "; ".join(problems)[:500] if problems else None

    return Readiness({"nats": nats_check, "mongodb": mongo_check,
                      "consumers": consumers_check})


async def start_health(addr: str, readiness: Readiness, metrics: Metrics) -> HealthServer:
    host, port = parse_addr(addr)
    server = HealthServer(readiness, metrics=metrics.render)
    try:
        bound_host, bound_port = await server.start(host, port)
    except OSError as exc:
        raise StartupFailed(f"cannot listen on {addr} (HEALTH_ADDR): "
                            f"{describe(exc, 0)}") from None
    log.info("health on http://%s:%d/healthz and /readyz, metrics on /metrics",
             bound_host, bound_port)
    return server
