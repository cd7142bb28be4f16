"""The operator console: a web application over the ledger (ADR 0025, docs/console.md)."""
