"""The console's JSON API: every route, by resource (console/routes/).

Reads go through the read port (services/read_ports.py), the same reads as the CLI's;
writes go through the operator client (the CLI's path, over NATS), the invariant
service or the dead-letter service (the CLI's calls), never straight into a database.
Every ID in a path is checked to be a ULID before anything is read; every list is
bounded; a refused command is a 4xx with `{"error": ...}` saying why.
"""

from __future__ import annotations

from starlette.routing import Route

from console.routes import (
    approvals,
    bulk,
    corrections,
    dead_letters,
    decisions,
    events,
    invariants,
    plans,
    search,
    upkeep,
    webhooks,
)
from contracts.corrections.states import CANCELLABLE, OPERATOR_FAILABLE, RETRYABLE, CorrectionStatus


def routes() -> list[Route]:
    cs = CorrectionStatus
    return [
        Route("/api/plans", plans.plans),
        Route("/api/find", plans.find),
        Route("/api/search", search.decisions),
        Route("/api/bulk", bulk.batches),
        Route("/api/bulk", bulk.request_batch, methods=["POST"]),
        Route("/api/bulk/preview", bulk.preview, methods=["POST"]),
        Route("/api/bulk/{batch_id}", bulk.batch),
        Route("/api/bulk/{batch_id}/cancel", bulk.cancel, methods=["POST"]),
        Route("/api/plans/{plan_id}", plans.plan),
        Route("/api/plans/{plan_id}/tree", plans.tree),
        Route("/api/plans/{plan_id}/as-of", plans.as_of),
        Route("/api/plans/{plan_id}/export", upkeep.export),
        Route("/api/plans/{plan_id}/complete", upkeep.ending("completed"), methods=["POST"]),
        Route("/api/plans/{plan_id}/abandon", upkeep.ending("abandoned"), methods=["POST"]),
        Route("/api/decisions/{decision_id}", decisions.decision),
        Route("/api/decisions/{decision_id}/dry-run", decisions.dry_run, methods=["POST"]),
        Route("/api/decisions/{decision_id}/affected", decisions.affected, methods=["POST"]),
        Route("/api/decisions/{decision_id}/corrections", decisions.correct,
              methods=["POST"]),
        Route("/api/decisions/{decision_id}/comments", upkeep.comment, methods=["POST"]),
        Route("/api/decisions/{decision_id}/approval", approvals.approval),
        Route("/api/decisions/{decision_id}/approval", approvals.decide, methods=["POST"]),
        Route("/api/approvals", approvals.approvals),
        Route("/api/corrections", corrections.corrections),
        Route("/api/corrections/{correction_id}", corrections.correction),
        Route("/api/corrections/{correction_id}/cancel",
              corrections.command("cancel", CANCELLABLE, cs.CANCELLED), methods=["POST"]),
        Route("/api/corrections/{correction_id}/fail",
              corrections.command("fail", OPERATOR_FAILABLE, cs.FAILED, reason_required=True),
              methods=["POST"]),
        Route("/api/corrections/{correction_id}/retry",
              corrections.command("retry", RETRYABLE, cs.PENDING), methods=["POST"]),
        Route("/api/dead-letters", dead_letters.dead_letters),
        Route("/api/dead-letters/retry", dead_letters.bulk_retry, methods=["POST"]),
        Route("/api/dead-letters/discard", dead_letters.bulk_discard, methods=["POST"]),
        Route("/api/dead-letters/{dead_letter_id}", dead_letters.dead_letter),
        Route("/api/dead-letters/{dead_letter_id}/retry", dead_letters.dead_letter_retry,
              methods=["POST"]),
        Route("/api/dead-letters/{dead_letter_id}/discard", dead_letters.dead_letter_discard,
              methods=["POST"]),
        Route("/api/invariants", invariants.invariants),
        Route("/api/violations", invariants.violations),
        Route("/api/violations/{violation_id}/resolve", invariants.resolve, methods=["POST"]),
        Route("/api/events", events.events),
        Route("/api/webhooks", webhooks.webhooks),
        Route("/api/webhooks", webhooks.add, methods=["POST"]),
        Route("/api/webhooks/deliveries", webhooks.deliveries),
        Route("/api/webhooks/{webhook_id}/remove", webhooks.remove, methods=["POST"]),
        Route("/schemas/{name}", webhooks.schema),
    ]
