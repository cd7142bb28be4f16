"""Corrections, approvals and violations as OpenTelemetry log-based events.

A correction's transitions, an approval and a violation's report or resolution are
moments, not operations with a duration: tracing UIs show them as events on the trace
of what caused them. Each one the ledger publishes (bootstrap.publisher calls
`log_event` for every event) is also emitted through the OpenTelemetry logs API, with
the event name `decision_ledger.<type>` (`decision_ledger.correction.applied`), the
CloudEvents attributes of the conventions (`cloudevents.event_id`, `..._type`,
`..._source`, `..._subject`), `gen_ai.conversation.id` (the plan), the body as its
structured body, and the trace context the event carries, so the record sits in the
trace of the request it answers. With no logger provider configured (the default) the
API's logger does nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from opentelemetry import propagate
from opentelemetry._logs import SeverityNumber, get_logger

from contracts.shared.cloudevents import TYPE_PREFIX
from contracts.shared.tracing import CONVERSATION, GENAI_SCHEMA_URL

LOGGED = ("correction.", "invariant.", "approval.")
"""The event types emitted as log events (prefixes of the CloudEvents type after
`io.decision-ledger.`): decisions are spans already, and a decision's persisted event
would be one log record per decision."""
EVENT_PREFIX = "decision_ledger."
WARNING = ("correction.failed", "correction.attempt.failed", "correction.rejected",
           "invariant.violated", "invariant.rejected")

log = logging.getLogger(__name__)
_logger = get_logger("decision_ledger.events", schema_url=GENAI_SCHEMA_URL)


def event_name(ce_type: str) -> str | None:
    """`decision_ledger.correction.applied` for `io.decision-ledger.correction.applied.v1`;
    None for a type that is not logged."""
    if not ce_type.startswith(TYPE_PREFIX):
        return None
    stem = ce_type[len(TYPE_PREFIX):].rsplit(".v", 1)[0]
    return EVENT_PREFIX + stem if stem.startswith(LOGGED) else None


def log_event(headers: Mapping[str, str], payload: bytes) -> None:
    """Emit the event whose CloudEvents headers are `headers`, if its type is logged.
    Never raises: telemetry must not stop a publish."""
    try:
        name = event_name(headers.get("ce-type", ""))
        if name is None:
            return
        stem = name[len(EVENT_PREFIX):]
        about = headers.get("ce-subject", "")
        attributes: dict[str, Any] = {
            "cloudevents.event_id": headers.get("ce-id", ""),
            "cloudevents.event_type": headers.get("ce-type", ""),
            "cloudevents.event_source": headers.get("ce-source", ""),
            "cloudevents.event_subject": about}
        if about.startswith("plan/"):
            plan = about.split("/", 2)[1]
            attributes |= {CONVERSATION: plan, "ledger.plan_id": plan}
        warn = stem in WARNING
        _logger.emit(
            event_name=name, context=propagate.extract(dict(headers)),
            severity_number=SeverityNumber.WARN if warn else SeverityNumber.INFO,
            severity_text="WARN" if warn else "INFO", body=_body(payload),
            attributes=attributes)
    except Exception:  # a telemetry failure is not the publish's
        log.debug("emitting the log event of %s failed", headers.get("ce-id"), exc_info=True)


def _body(payload: bytes) -> Any:
    try:
        return json.loads(payload)
    except ValueError:
        return None
