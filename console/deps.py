"""What the console's routes use, built once when the console starts.

`Deps.of` takes them from the opened ledger (console.wiring); a test may build them over
the in-memory store instead, since every read goes through the read port
(services/read_ports.py) and every write through a service or the operator client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.requests import Request

from bootstrap.ledger import Ledger
from clients.operator import CorrectionClient
from console.affected import AffectedSets
from console.live import Hub
from contracts.shared.rules import RuleViolation
from contracts.trust.policy import Identity
from services.bulk import BulkService
from services.dead_letters import DeadLetterService
from services.invariants import InvariantService
from services.read_ports import LedgerReads
from services.webhooks import WebhookService


@dataclass
class Deps:
    reads: LedgerReads
    invariants: InvariantService
    dead_letters: DeadLetterService
    ops: CorrectionClient
    """Corrections are requested, cancelled, failed and retried over NATS, as by any client."""
    hub: Hub
    operator_name: str = "operator"
    affected: AffectedSets = field(default_factory=AffectedSets)
    resolution_identity: Callable[[str, str], Identity | RuleViolation] = \
        field(default=lambda violation_id, plan_id: None)
    """Who resolves a violation (violation_id, plan_id), as the ledger verifies it: the
    console's principal signing (console.wiring); None: unverified."""
    webhooks: WebhookService | None = None
    search_scan_max: int = 2000
    """Settings.search_scan_max: decisions one page of a search reads at most."""
    bulk: BulkService | None = None
    """Bulk correction batches (None: a console over a store without them)."""
    bulk_identity: Callable[[str], Identity | RuleViolation] = field(
        default=lambda batch_id: None)
    """Who requests a bulk batch (its ID), as the workers will verify each request: the
    console's principal (console.wiring); None: unverified."""
    bulk_tasks: set[asyncio.Task[None]] = field(default_factory=set)
    """The batches being sent (kept here so none is collected half-way)."""

    @classmethod
    def of(cls, ledger: Ledger, ops: CorrectionClient, hub: Hub, operator_name: str) -> Deps:
        return cls(reads=ledger.reads, invariants=ledger.invariants,
                   dead_letters=ledger.dead_letters, ops=ops, hub=hub,
                   operator_name=operator_name, webhooks=ledger.webhooks,
                   search_scan_max=ledger.settings.search_scan_max, bulk=ledger.bulk)


def deps(request: Request) -> Deps:
    found: Deps = request.app.state.deps
    return found
