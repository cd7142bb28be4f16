"""The one wiring module: settings -> clients -> repositories -> services -> FastStream app.

Clients are created in the app's startup hook, never at import, so importing this
module (e.g. to generate the AsyncAPI document) touches no server.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from faststream import FastStream
from faststream.nats import NatsBroker
from faststream.specification import AsyncAPI
from pymongo import AsyncMongoClient

from services.recorder import RecorderPolicy, RecorderService
from store.database import Document, connect, ensure_indexes
from store.dead_letters import DeadLetterRepository
from store.decisions import DecisionRepository
from workers.publisher import JetStreamPublisher
from workers.pull import BatchPuller
from workers.recorder import document_recorder, recorder_puller
from workers.settings import Settings
from workers.streams import ensure_streams

log = logging.getLogger(__name__)

TITLE = "Decision ledger"
VERSION = "0.1.0"


@dataclass
class Runtime:
    """What the handlers use, filled in at startup."""

    mongo: AsyncMongoClient[Document] | None = None
    recorder: RecorderService | None = None
    pullers: list[BatchPuller] = field(default_factory=list)

    def get_recorder(self) -> RecorderService:
        assert self.recorder is not None, "the app has not started"
        return self.recorder


def build_app(settings: Settings | None = None, *, for_docs: bool = False) -> FastStream:
    """The worker app; `for_docs` builds it only to generate the AsyncAPI document."""
    settings = settings or Settings.from_env()
    broker = NatsBroker(settings.nats_url, graceful_timeout=settings.graceful_timeout)
    runtime = Runtime()
    document_recorder(broker, for_docs=for_docs)

    app = FastStream(
        broker,
        specification=AsyncAPI(
            title=TITLE, version=VERSION,
            description="Agents record decisions; operators correct them; subscribers react.",
        ),
    )

    @app.on_startup
    async def start() -> None:
        mongo = connect(settings.mongodb_uri)
        db = mongo[settings.mongodb_db]
        await ensure_indexes(db)
        await broker.connect()
        await ensure_streams(broker.connection.jetstream())
        runtime.mongo = mongo
        runtime.recorder = RecorderService(
            DecisionRepository(db), DeadLetterRepository(db),
            JetStreamPublisher(broker.connection),
            RecorderPolicy(parent_wait_seconds=settings.recorder_parent_wait_seconds),
        )
        log.info("workers connected to %s and %s/%s", settings.nats_url,
                 settings.mongodb_uri, settings.mongodb_db)

    @app.after_startup
    async def start_consumers() -> None:
        js = broker.connection.jetstream()
        runtime.pullers = [recorder_puller(js, settings, runtime.get_recorder)]
        for puller in runtime.pullers:
            await puller.start()

    @app.on_shutdown
    async def stop_consumers() -> None:
        for puller in runtime.pullers:
            await puller.stop(settings.graceful_timeout)

    @app.after_shutdown
    async def close_clients() -> None:
        if runtime.mongo is not None:
            await runtime.mongo.close()

    return app
