"""Webhooks: HTTP endpoints subscribed to the ledger's events, signed per Standard
Webhooks, retried within bounds (docs/webhooks.md)."""
