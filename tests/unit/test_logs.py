"""Log lines: JSON for a pipeline (with the IDs a line is about), bounded, never coloured."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from workers.logs import MAX_LINE_CHARS, JsonFormatter

pytestmark = pytest.mark.unit


def record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    r = logging.LogRecord("services.corrections", logging.WARNING, __file__, 1, msg, args, None)
    for k, v in extra.items():
        setattr(r, k, v)
    return r


def test_a_json_line_names_the_worker_and_the_ids_it_is_about() -> None:
    line = json.loads(JsonFormatter("W1").format(record(
        "correction %s FAILED: %s", "C1", "boom", correction_id="C1", plan_id="P1",
        unrelated="x")))
    assert line["message"] == "correction C1 FAILED: boom"
    assert (line["level"], line["logger"], line["worker_id"]) == (
        "warning", "services.corrections", "W1")
    assert (line["correction_id"], line["plan_id"]) == ("C1", "P1")
    assert "unrelated" not in line and line["time"].endswith("Z")


def test_a_json_line_is_bounded_and_survives_a_bad_template() -> None:
    huge = json.loads(JsonFormatter().format(record("%s", "x" * 100_000)))
    assert len(huge["message"]) < MAX_LINE_CHARS + 100
    bad = json.loads(JsonFormatter().format(record("%d items", "not a number")))
    assert bad["message"] == "%d items"


def test_an_exception_is_one_field_of_the_line() -> None:
    try:
        raise ValueError("nope")
    except ValueError:
        r = record("failed")
        r.exc_info = sys.exc_info()
    line = json.loads(JsonFormatter().format(r))
    assert "ValueError: nope" in line["error"] and "\n" not in JsonFormatter().format(r)
