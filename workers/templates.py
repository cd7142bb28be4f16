"""The template consumer: `agents plan use` requests off invariants.templates.* applied
by services.plan_templates, through the inbound pipeline like every consumer."""

from __future__ import annotations

import logging

from contracts.invariants import subjects
from contracts.invariants.families import TEMPLATES
from contracts.invariants.plan_use import PlanUseRequest, read_plan_use
from contracts.shared.unreadable import Unreadable
from contracts.trust.policy import Identity
from workers.batch import Batch
from workers.deps import Deps
from workers.plan_requests import PlanRequestConsumer

log = logging.getLogger(__name__)


class TemplateConsumer(PlanRequestConsumer[PlanUseRequest]):
    """invariants.templates.*: apply each `agents plan use` request (workers.plan_requests)."""

    family = TEMPLATES
    prefix = subjects.TEMPLATES_PREFIX
    read_request = staticmethod(read_plan_use)

    def __init__(self, deps: Deps) -> None:
        super().__init__(deps)
        self._templates = deps.templates

    async def decide(self, batch: Batch[PlanUseRequest | Unreadable]) -> None:
        if self._templates is None:
            raise RuntimeError("the workers did not wire the template service")
        await super().decide(batch)

    async def apply(self, request: PlanUseRequest, identity: Identity) -> None:
        assert self._templates is not None  # decide checked it
        outcome = await self._templates().use(request, identity)
        log.info("plan use %s on %s: %s", request.action_template, request.plan_id,
                 outcome.status.value)
