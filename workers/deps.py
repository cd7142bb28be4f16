"""What a handler reaches: the settings and each service, through getters filled in at
startup (so building the handlers touches no server)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from nats.aio.client import Client

from bootstrap.settings import Settings
from contracts.shared.families import MessageFamily
from contracts.trust.policy import FamilyTrust, TrustPolicy
from services.approvals import ApprovalService
from services.corrections.policy import CrashHook, no_crash
from services.corrections.service import CorrectionService
from services.invariants import InvariantService
from services.plan_templates import PlanTemplateService
from services.recorder import RecorderService
from services.upkeep import UpkeepService
from store.dead_letters import DeadLetterRepository
from store.deliveries import DeliveryFailures
from workers.inbound import Handler

R = TypeVar("R")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Deps:
    settings: Settings
    recorder: Callable[[], RecorderService]
    corrections: Callable[[], CorrectionService]
    invariants: Callable[[], InvariantService]
    dead_letters: Callable[[], DeadLetterRepository]
    upkeep: Callable[[], UpkeepService]
    """Comments, plan endings and dead-letter discards (workers.upkeep)."""
    failures: DeliveryFailures | None = None
    nc: Client | None = None
    """The workers' NATS connection, for reading the stream beside a consumer (a cancel
    queued after its request); None where no server runs (unit tests)."""
    """Where every consumer records its failed deliveries (None: in memory only)."""
    crash: CrashHook = no_crash
    templates: Callable[[], PlanTemplateService] | None = None
    """`agents plan use` requests (None: a test that runs no template consumer)."""
    approvals: Callable[[], ApprovalService] | None = None
    """Operators' verdicts on held decisions (None: a test that runs no verdict consumer)."""
    trust: TrustPolicy = field(default_factory=TrustPolicy)
    """What is verified of who sent each inbound message (Settings.trust_policy, read
    once at start)."""

    def trust_for(self, family: MessageFamily) -> FamilyTrust | None:
        """A handler's `trust`: its family's check (None for an event family)."""
        return self.trust.for_family(family)


class DeclaredHandler(Handler[R], Protocol[R]):
    """The handler of a durable the workers declare (contracts.families)."""

    def extra_deliveries(self) -> int:
        """Deliveries that are waits, not failures (the declaration's `waits`), on top
        of CONSUMER_MAX_DELIVER; 0 when it never waits."""
        ...


HandlerClass = Callable[[Deps], DeclaredHandler[R]]
"""A handler class: built from `Deps`."""
