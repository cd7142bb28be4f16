"""A downstream service that reacts to correction outcomes (APPLIED and FAILED).

    .venv/bin/python examples/subscriber_prints_outcomes.py [--count N] [--durable NAME]

It reads a durable JetStream consumer: stop it and start it again, and it prints
what it missed meanwhile. Each event is acknowledged after it was printed.
NATS_URL defaults to what `agents up` listens on.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from pathlib import Path

# Run from a clone without installing: make the repository importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import nats

from clients import CorrectionStatus, CorrectionTransitioned, outcomes

NATS_URL = os.environ.get("NATS_URL", "nats://127.0.0.1:4222")


def react(event: CorrectionTransitioned) -> None:
    """Your service's reaction goes here; it must tolerate seeing an event twice."""
    if event.to_status is CorrectionStatus.APPLIED:
        print(f"APPLIED {event.mode.value} {event.correction_id} plan {event.plan_id}: "
              f"new decision {event.new_decision_id}, {len(event.superseded_ids)} superseded, "
              f"child plans rolled back {event.child_plans_rolled_back or '-'}, "
              f"spawned {event.child_plans_spawned or '-'}", flush=True)
    else:
        print(f"FAILED {event.mode.value} {event.correction_id} plan {event.plan_id}: "
              f"{event.error}", flush=True)


async def main(count: int | None, durable: str) -> None:
    nc = await nats.connect(NATS_URL.split(","))  # one server, or a cluster's list
    try:
        feed = outcomes(nc, statuses={"applied", "failed"}, durable=durable, limit=count)
        await feed.open()  # from here on no outcome is missed, even if we are slow
        print(f"listening for applied/failed corrections on {NATS_URL} (durable {durable})",
              flush=True)
        async for event in feed:
            react(event)
    finally:
        await nc.drain()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=None, help="exit after N outcomes")
    parser.add_argument("--once", action="store_const", const=1, dest="count",
                        help="exit after one outcome")
    parser.add_argument("--durable", default="example-subscriber")
    args = parser.parse_args()
    # Ctrl-C stops it quietly; the event in hand, if any, is redelivered next time.
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(args.count, args.durable))
