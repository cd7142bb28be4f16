"""REDACTION_DETECTORS and REDACTION_PATTERNS (docs/retention.md, Redaction), read into
the compiled rules every process that stores text applies."""

from __future__ import annotations

import json
import os

from contracts.redaction.rules import Rules


def read_redaction() -> Rules:
    """The rules the environment gives: REDACTION_DETECTORS a comma-separated list of
    built-in detectors (unset: all; `none` or empty: none), REDACTION_PATTERNS a JSON
    object of name to regular expression. ValueError (one line) naming a bad one."""
    built_in = os.environ.get("REDACTION_DETECTORS")
    if built_in is not None and built_in.strip().lower() == "none":
        built_in = ""
    raw = os.environ.get("REDACTION_PATTERNS", "").strip()
    patterns: object = {}
    if raw:
        try:
            patterns = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"REDACTION_PATTERNS: not JSON ({exc})") from None
        if not isinstance(patterns, dict):
            raise ValueError("REDACTION_PATTERNS: a JSON object of name to pattern")
    return Rules.configured(built_in, patterns if isinstance(patterns, dict) else {})
