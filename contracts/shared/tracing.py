"""W3C trace context on the bus: what a message may carry, read without trusting it.

An agent's or operator's client puts `traceparent` (and `tracestate`) in the headers of
what it publishes; the workers carry the same context onto the events they publish
about it, so one trace runs from an operator's request to its APPLIED event. Headers
are hostile input like any other: only a well-formed `traceparent` is kept, and a
`tracestate` only beside one, cut at its W3C limit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
TRACESTATE_MAX = 512
"""Characters of tracestate kept (the W3C recommendation for what to propagate)."""

_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def trace_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The trace context `headers` carry, if well-formed; {} otherwise. Never raises."""
    if not headers:
        return {}
    parent = headers.get(TRACEPARENT)
    if not isinstance(parent, str) or not _TRACEPARENT.fullmatch(parent) \
            or parent.startswith("ff") or set(parent[3:35]) == {"0"} \
            or set(parent[36:52]) == {"0"}:
        return {}
    out = {TRACEPARENT: parent}
    state = headers.get(TRACESTATE)
    if isinstance(state, str) and state:
        out[TRACESTATE] = state[:TRACESTATE_MAX]
    return out


def trace_id(headers: Mapping[str, str] | None) -> str | None:
    """The 32-hex trace ID of a well-formed traceparent, else None."""
    parent = trace_headers(headers).get(TRACEPARENT)
    return parent[3:35] if parent else None
