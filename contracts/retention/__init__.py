"""Retention and erasure (docs/retention.md): what an erasure removes from a record and
what it keeps (erasure.py), and which plans a retention policy touches (policies.py)."""
