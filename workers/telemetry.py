"""Exporting the workers' traces and log events, when asked for: the standard
OpenTelemetry variables.

The workers always carry the trace context a message came with onto the events they
publish about it (contracts.shared.tracing), whether or not anything is exported. To also
export their own spans (one per correction step, named after the status it starts
from, with the correction, plan and target IDs and `gen_ai.conversation.id`) and the
log events of corrections and violations (bootstrap.event_log), install the `telemetry`
extra and set `OTEL_TRACES_EXPORTER=otlp` (with `OTEL_EXPORTER_OTLP_ENDPOINT`; setting
the endpoint alone is enough) or `console` (JSON on stdout, for a look).
`OTEL_LOGS_EXPORTER` chooses the log events' exporter the same way (default: the
traces'). Unset or `none`: nothing is exported and tracing costs next to nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

EXTRA_HINT = "pip install 'decision-ledger[telemetry]'"
KINDS = ("otlp", "console")


def _chosen(variable: str, default: str = "") -> str:
    exporter = os.environ.get(variable, "").strip().lower()
    if not exporter:
        exporter = default
    if not exporter and os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        exporter = "otlp"
    return "" if exporter == "none" else exporter


def _span_exporter(kind: str) -> Any:
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter
        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter,
    )
    return OTLPSpanExporter()


def _log_exporter(kind: str) -> Any:
    if kind == "console":
        from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter
        return ConsoleLogRecordExporter()
    from opentelemetry.exporter.otlp.proto.http._log_exporter import (
        OTLPLogExporter,
    )
    return OTLPLogExporter()


def _traces(kind: str, resource: Any) -> Callable[[], None]:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SimpleSpanProcessor,
    )
    provider = TracerProvider(resource=resource)
    exporter = _span_exporter(kind)
    provider.add_span_processor(SimpleSpanProcessor(exporter) if kind == "console"
                                else BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return provider.shutdown


def _logs(kind: str, resource: Any) -> Callable[[], None]:
    from opentelemetry._logs import set_logger_provider
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import (
        BatchLogRecordProcessor,
        SimpleLogRecordProcessor,
    )
    provider = LoggerProvider(resource=resource)
    exporter = _log_exporter(kind)
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter) if kind == "console"
                                      else BatchLogRecordProcessor(exporter))
    set_logger_provider(provider)
    return provider.shutdown


def configure_tracing(service_name: str = "decision-ledger-workers") -> Callable[[], None]:
    """Set up the exporters the environment names; returns what flushes them at shutdown."""
    traces = _chosen("OTEL_TRACES_EXPORTER")
    logs = _chosen("OTEL_LOGS_EXPORTER", traces)
    wanted = [(n, k) for n, k in (("OTEL_TRACES_EXPORTER", traces),
                                  ("OTEL_LOGS_EXPORTER", logs)) if k]
    for name, kind in wanted:
        if kind not in KINDS:
            log.warning("%s=%s is not one of otlp, console, none; nothing is exported for "
                        "it", name, kind)
    wanted = [(n, k) for n, k in wanted if k in KINDS]
    if not wanted:
        return lambda: None
    try:
        from opentelemetry.sdk.resources import Resource
        resource = Resource.create({"service.name": service_name})
        stops = [(_traces if name == "OTEL_TRACES_EXPORTER" else _logs)(kind, resource)
                 for name, kind in wanted]
    except ImportError:
        log.warning("%s but the OpenTelemetry SDK or its OTLP exporter is not installed "
                    "(%s); nothing is exported",
                    ", ".join(f"{n}={k}" for n, k in wanted), EXTRA_HINT)
        return lambda: None
    log.info("exporting %s", ", ".join(f"{n.split('_')[1].lower()} ({k})"
                                        for n, k in wanted))

    def flush() -> None:
        for stop in stops:
            stop()
    return flush
