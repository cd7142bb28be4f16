"""Exporting the workers' traces, when asked for: the standard OpenTelemetry variables.

The workers always carry the trace context a message came with onto the events they
publish about it (contracts.shared.tracing), whether or not anything is exported. To also
export their own spans (one per correction step, named after the status it starts
from, with the correction, plan and target IDs), install the `telemetry` extra and set
`OTEL_TRACES_EXPORTER=otlp` (with `OTEL_EXPORTER_OTLP_ENDPOINT`; setting the endpoint
alone is enough) or `console` (spans as JSON on stdout, for a look). Unset or `none`:
nothing is exported and tracing costs next to nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

log = logging.getLogger(__name__)

EXTRA_HINT = "pip install 'decision-ledger[telemetry]'"


def configure_tracing(service_name: str = "decision-ledger-workers") -> Callable[[], None]:
    """Set up the exporter the environment names; returns what flushes it at shutdown."""
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if not exporter and os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        exporter = "otlp"
    if exporter in ("", "none"):
        return lambda: None
    try:
        from opentelemetry import trace  # noqa: PLC0415
        from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
        from opentelemetry.sdk.trace.export import (  # noqa: PLC0415
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
            SpanExporter,
        )
    except ImportError:
        log.warning("OTEL_TRACES_EXPORTER=%s but the OpenTelemetry SDK is not installed "
                    "(%s); no spans are exported", exporter, EXTRA_HINT)
        return lambda: None
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if exporter == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    elif exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
                OTLPSpanExporter,
            )
        except ImportError:
            log.warning("OTEL_TRACES_EXPORTER=otlp but the OTLP exporter is not installed "
                        "(%s); no spans are exported", EXTRA_HINT)
            return lambda: None
        otlp: SpanExporter = OTLPSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(otlp))
    else:
        log.warning("OTEL_TRACES_EXPORTER=%s is not one of otlp, console, none; no spans "
                    "are exported", exporter)
        return lambda: None
    trace.set_tracer_provider(provider)
    log.info("exporting traces (%s)", exporter)
    return provider.shutdown
