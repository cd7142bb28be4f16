"""Publishing what the transactional outbox holds for one key (a correction, a violation)."""

from __future__ import annotations

import logging

from services.ports.publishing import EventPublisher
from services.ports.records import OutboxRecords

log = logging.getLogger(__name__)


async def flush(outbox: OutboxRecords, publisher: EventPublisher, key: str) -> None:
    """Publish the key's pending events in order, then forget them. A failed publish is
    left to the next flush or the relay: the state change is already committed, and the
    events keep their Nats-Msg-Id, so a second publish is dropped by JetStream."""
    pending = await outbox.pending_for(key)
    if not pending:
        return
    try:
        await publisher.publish_all([p.message for p in pending])
    except Exception:
        log.warning("publishing %d event(s) of %s failed; the relay will retry",
                    len(pending), key, exc_info=True)
        return
    await outbox.delete([p.message.msg_id for p in pending])
