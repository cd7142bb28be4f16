"""The operator console: a web application over the ledger (issue 11, docs/console.md)."""
