"""Live worker processes (collection `workers`), so a dead one's open transactions are ended
in seconds instead of blocking its documents until the server gives up on them.

Why: a worker SIGKILLed inside a transaction leaves it open on the server, holding
its write locks: the recorder's plan counter, a correction's documents. MongoDB
aborts such a transaction only after `transactionLifetimeLimitSeconds` (60 s by
default; measured 60 s on the embedded server too), and until then every writer of
those documents meets a write conflict and retries. So each worker

- writes a heartbeat document {_id: worker_id, expires_at, lsids} every second or so;
- adds a session's id (lsid) to it *before* that session's first transaction (once
  per pooled session: the driver reuses a handful, so this is rare, never per batch);
- and, finding another worker's heartbeat expired, ends that worker's sessions with
  `killSessions` (which aborts their open transactions at once) and deletes its
  document.

A worker that was only stalled past its heartbeat (not dead) loses its open
transaction the same way; that is safe, since every transaction here is all or
nothing and retried, and its next heartbeat registers it again.

Heartbeats are stamped and judged by the database server's clock (store.server_clock,
ADR 0027): a worker whose own clock is behind would otherwise write a heartbeat that
has already expired for the others, and one ahead would take every live worker for dead.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import timedelta
from typing import Any

from bson.binary import Binary
from pymongo.asynchronous.client_session import AsyncClientSession
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import PyMongoError

from store.database import WORKERS, Document
from store.server_clock import NOW, after_now, expired
from store.translate import translate_errors

log = logging.getLogger(__name__)


def lsid_of(session: AsyncClientSession) -> Binary:
    """The server-side id of a driver session (materialised on first use)."""
    sid: Any = session.session_id
    value = sid["id"]
    return value if isinstance(value, Binary) else Binary(bytes(value), 4)


@translate_errors
class WorkerRegistry:
    """This process's heartbeat and sessions, and the reaping of dead workers'."""

    def __init__(self, db: AsyncDatabase[Document], worker_id: str,
                 lease_seconds: float) -> None:
        self._coll = db[WORKERS]
        self._admin = db.client.admin
        self.worker_id = worker_id
        self.lease = timedelta(seconds=lease_seconds)
        self._registered: set[bytes] = set()

    async def heartbeat(self) -> None:
        """Renew this worker's lease. If a reaper removed the document (we stalled), the
        sessions it listed were ended: forget them, so each is registered again."""
        first = {"started_at": NOW, "host": {"$literal": socket.gethostname()},
                 "pid": os.getpid(), "lsids": {"$literal": []}}
        res = await self._coll.update_one(
            {"_id": self.worker_id},
            [{"$set": {"expires_at": after_now(self.lease), "seen_at": NOW,
                       **{k: {"$ifNull": [f"${k}", v]} for k, v in first.items()}}}],
            upsert=True)
        if res.upserted_id is not None:
            self._registered.clear()

    async def register(self, session: AsyncClientSession) -> None:
        """Note the session before its transaction starts, so a reaper can end it."""
        lsid = lsid_of(session)
        if bytes(lsid) in self._registered:
            return
        await self._coll.update_one(
            {"_id": self.worker_id}, {"$addToSet": {"lsids": lsid}}, upsert=True)
        self._registered.add(bytes(lsid))

    async def reap(self) -> list[str]:
        """End the sessions of every worker whose heartbeat expired (by the server's
        clock); return their ids."""
        reaped = []
        async for doc in self._coll.find({"_id": {"$ne": self.worker_id},
                                          "expires_at": {"$type": "date"},
                                          "$expr": expired("expires_at")}):
            lsids = [{"id": x} for x in doc.get("lsids", [])]
            try:
                if lsids:
                    await self._admin.command({"killSessions": lsids})
            except PyMongoError as exc:
                log.warning("could not end the sessions of dead worker %s: %s",
                            doc["_id"], exc)
                continue
            # Only the document we read: a worker that came back meanwhile renewed it.
            res = await self._coll.delete_one({"_id": doc["_id"],
                                               "expires_at": doc["expires_at"]})
            if res.deleted_count:
                reaped.append(str(doc["_id"]))
                log.warning("worker %s (pid %s on %s) stopped beating; ended its %d "
                            "session(s)", doc["_id"], doc.get("pid"), doc.get("host"),
                            len(lsids))
        return reaped

    async def leave(self) -> None:
        """A clean stop: nothing of ours is open any more."""
        await self._coll.delete_one({"_id": self.worker_id})
