"""The console's webhooks page's API, served for real: add (the secret in the answer,
once), list (never the secret), deliveries, remove; and the event schemas every event's
ce-dataschema names."""

from __future__ import annotations

import json

import httpx
import nats
import pytest
from pymongo.asynchronous.database import AsyncDatabase

from bootstrap.publisher import JetStreamPublisher
from services.webhook_secrets import Sealer
from services.webhooks import WebhookService
from store.database import Document
from store.mongo_store import MongoStore
from tests.integration.console_support import Console, console

__all__ = ["console"]

pytestmark = pytest.mark.e2e


async def test_webhooks_through_the_console(console: Console, db: AsyncDatabase[Document],
                                            nc: nats.NATS) -> None:
    console.deps.webhooks = WebhookService(MongoStore(db).webhooks, JetStreamPublisher(nc),
                                           Sealer(None))
    async with httpx.AsyncClient(base_url=console.url, timeout=30) as http:
        refused = await http.post("/api/webhooks", json={"url": "file:///etc/passwd",
                                                         "events": ["*"]})
        assert refused.status_code == 400 and "http" in refused.json()["error"]
        added = await http.post("/api/webhooks", json={
            "url": "https://hooks.example/x", "events": "correction.applied, invariant.*"})
        assert added.status_code == 201, added.text
        secret = added.json()["secret"]
        assert secret.startswith("whsec_")
        listed = await http.get("/api/webhooks")
        assert secret not in listed.text and "secret\"" not in listed.text
        [w] = listed.json()["webhooks"]
        assert w["events"] == ["correction.applied", "invariant.*"]
        assert listed.json()["sealed"] is False
        assert (await http.get("/api/webhooks/deliveries")).json() == {"deliveries": []}
        assert (await http.get("/api/webhooks/deliveries?status=nope")).status_code == 400
        gone = await http.post(f"/api/webhooks/{w['webhook_id']}/remove", json={})
        assert gone.status_code == 200 and gone.json()["removed_at"]
        assert (await http.post(f"/api/webhooks/{w['webhook_id']}/remove",
                                json={})).status_code == 404
        schema = await http.get("/schemas/corrections.events.json")
        assert schema.status_code == 200
        assert json.loads(schema.text)["x-family"] == "corrections.events"
        for bad in ("/schemas/..%2Fpyproject.toml", "/schemas/nope.json"):
            assert (await http.get(bad)).status_code == 404
