"""The dry-run responder: core request-reply on `corrections.dryrun.*`, a queue group so
one worker answers each request (both from the family's declaration).

Read-only, but not open to everyone: the request's signature is verified as any inbound
message's (contracts.trust: a refusal is answered with its rule as the error, e.g.
`unsigned` where signatures are required), and a verified operator is answered only for
plans within its projects (`operator_scope`: a report lists another team's decisions
and files). Every request is answered, with a DryRunReport or a DryRunError saying why
there is none, never over the connection's payload limit. Answered only to an inbox
(`_INBOX…`): nats-server does not check a reply subject against the requester's
permissions, and the workers may publish events, so a request naming
`corrections.events.<plan>.applied` as its reply would otherwise have the report stored
there as if it were an event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from contracts.corrections.errors import TargetInOtherPlan, TargetSuperseded
from contracts.corrections.families import DRYRUN
from contracts.corrections.refusals import DryRunError
from contracts.corrections.wire import read_request
from contracts.impact.errors import TargetNotFound
from contracts.shared.bounds import DEFAULT_MAX_PAYLOAD_BYTES
from contracts.shared.roles import Via
from contracts.shared.rules import RuleViolation
from contracts.shared.subject_tokens import plan_of
from contracts.shared.timestamps import utc_now
from contracts.shared.unreadable import Unreadable, describe, guarded, truncate
from contracts.trust.policy import FamilyTrust
from services.corrections.service import CorrectionService

log = logging.getLogger(__name__)

Service = Callable[[], CorrectionService]

ERROR_CODES: dict[type[Exception], str] = {
    TargetNotFound: "target_not_found",
    TargetInOtherPlan: "target_in_other_plan",
    TargetSuperseded: "target_superseded",
}


async def answer_dry_run(svc: CorrectionService, subject: str, data: bytes,
                         max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES, *,
                         headers: Mapping[str, str] | None = None,
                         trust: FamilyTrust | None = None) -> bytes:
    """The reply body: a DryRunReport, or a DryRunError saying why there is none."""
    plan = plan_of(subject, DRYRUN.name)
    who = guarded(lambda: trust.identify(dict(headers or {}), subject, data, utc_now())) \
        if trust is not None else None
    if isinstance(who, RuleViolation):
        return DryRunError(error=who.rule.value, message=truncate(who.message),
                           plan_id=plan).model_dump_json().encode()
    r = guarded(lambda: read_request(subject, data, prefix=DRYRUN.name,
                                     max_payload_bytes=max_payload_bytes))
    if isinstance(r, RuleViolation):
        r = Unreadable(plan, None, (r,))
    if isinstance(r, Unreadable):
        err = DryRunError(error="invalid_request", message=r.reason,
                          correction_id=r.message_id, plan_id=plan)
        return err.model_dump_json().encode()
    refused = await svc.scope_refusal(who, r.plan_id)
    if refused is not None:
        return DryRunError(error=refused.rule.value, message=refused.message,
                           correction_id=r.correction_id, plan_id=r.plan_id,
                           decision_id=r.decision_id).model_dump_json().encode()
    try:
        report = await svc.generate_dry_run_report(r)
    except (TargetNotFound, TargetInOtherPlan, TargetSuperseded) as exc:
        err = DryRunError(error=ERROR_CODES[type(exc)], message=str(exc),
                          correction_id=r.correction_id, plan_id=r.plan_id,
                          decision_id=r.decision_id)
        return err.model_dump_json().encode()
    return report.model_dump_json().encode()


def _internal_error(subject: str, message: str) -> bytes:
    return DryRunError(error="internal_error", message=truncate(message),
                       plan_id=plan_of(subject, DRYRUN.name),
                       ).model_dump_json().encode()


async def start_dry_run(nc: Client, service: Service,
                        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
                        trust: FamilyTrust | None = None) -> Subscription:
    """Every request is answered: with the report, or a DryRunError, never over the
    connection's payload limit. `trust`: the family's check (Deps.trust_for(DRYRUN))."""
    async def on_request(msg: Msg) -> None:
        try:
            body = await answer_dry_run(service(), msg.subject, msg.data, max_payload_bytes,
                                        headers=msg.headers, trust=trust)
        except Exception as exc:
            log.warning("dry run on %s failed: %s", msg.subject, describe(exc))
            body = _internal_error(msg.subject, describe(exc))
        if len(body) > nc.max_payload:
            body = _internal_error(msg.subject, f"the report is {len(body)} bytes, over the "
                                   f"{nc.max_payload}-byte payload limit")
        if msg.reply and msg.reply.startswith("_INBOX"):
            try:
                await msg.respond(body)
            except Exception as exc:
                log.warning("could not answer the dry run on %s: %s", msg.subject,
                            describe(exc))

    [responder] = [r for r in DRYRUN.readers if r.via is Via.RESPONDER]
    return await nc.subscribe(DRYRUN.wildcard, queue=responder.queue or "", cb=on_request)
