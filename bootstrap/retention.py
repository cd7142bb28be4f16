"""The retention pass wired to the ledger's store (services.retention), for the
workers' loop and `agents retention`."""

from __future__ import annotations

from pathlib import Path

from bootstrap.retention_settings import RetentionSettings
from services.retention import Ports, RetentionService
from store.mongo_store import MongoStore


def retention_service(settings: RetentionSettings, store: MongoStore,
                      archive_root: Path | None = None) -> RetentionService:
    """The retention pass over the ledger's store (and the revert archives under
    `archive_root`), as the settings configure it."""
    return RetentionService(Ports(store.retention, store.erasures, store.audit, archive_root),
                            settings.policies, export_dir=settings.export_dir,
                            batch=settings.batch, max_batches=settings.max_batches)
