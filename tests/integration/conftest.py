"""Fixtures shared by the integration tests that drive corrections in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from services.archive.writer import Archive
from services.corrections.policy import CorrectionPolicy
from services.corrections.service import CorrectionService
from services.ports.corrections import CorrectionStorePort
from store.correction_store import CorrectionStore
from store.database import Document, ensure_indexes
from tests.integration.bounds_support import Commands, counted_client
from workers.streams import ensure_streams

FAST = CorrectionPolicy(attempt_backoff_seconds=0.05)
"""Retries of a failed attempt without the production pause."""

MakeService = Callable[..., CorrectionService]


@pytest.fixture
async def make(db: AsyncDatabase[Document], nc: nats.NATS,
               tmp_path: Path) -> AsyncIterator[MakeService]:
    """Build a CorrectionService over the test's servers: `make()`, `make(archive_root)`,
    `make(Archive(...))`, with `lease=` and `policy=` when a test needs others."""
    await ensure_streams(nc.jetstream())
    (tmp_path / "artifacts").mkdir()

    def build(archive: Archive | Path | None = None, *, lease: float = 5,
              policy: CorrectionPolicy = FAST,
              ports: Callable[[CorrectionStore], CorrectionStorePort] | None = None
              ) -> CorrectionService:
        """`ports` replaces some of the store's ports (e.g. `dataclasses.replace(store,
        impact=ImpactThen(...))` from tests/port_wrappers.py) to set up a race."""
        if not isinstance(archive, Archive):
            archive = Archive(archive or tmp_path / "archive", tmp_path / "artifacts")
        store = CorrectionStore.open(db, lease_seconds=lease)
        return CorrectionService(store if ports is None else ports(store),
                                 JetStreamPublisher(nc), archive, policy=policy)

    yield build


@pytest.fixture
async def counted(mongo_uri: str, db_name: str
                  ) -> AsyncIterator[tuple[AsyncDatabase[Document], Commands]]:
    """A database whose client counts every command it sends."""
    client, commands = counted_client(mongo_uri)
    db = client[db_name]
    await ensure_indexes(db)
    try:
        yield db, commands
    finally:
        await client.close()
