"""The workers' log lines: plain text for a person, JSON lines for a log pipeline.

`LOG_FORMAT=json` writes one JSON object per line on stderr with the time (UTC, ISO),
level, logger, message, the worker's ID, and the plan / decision / correction / dead
letter IDs a line is about when the code names them (`extra={"correction_id": ...}`,
with the names in ID_FIELDS), so a pipeline
can follow one correction or one plan across replicas. `LOG_FORMAT=text` (the default)
writes the same lines for a person. Neither carries colour codes: FastStream's own
loggers (which colour whatever the output) are routed through the same handler.
A line is cut at MAX_LINE_CHARS, so a hostile payload echoed in an error cannot make
one log line arbitrarily large.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from bootstrap.setting_types import LogFormat

__all__ = ["BROKER_LOGGER", "ID_FIELDS", "MAX_LINE_CHARS", "JsonFormatter", "LogFormat",
           "configure", "set_worker_id"]

MAX_LINE_CHARS = 8000
"""Longest message (and traceback) a line carries; the rest is cut with a marker."""

ID_FIELDS = ("plan_id", "decision_id", "correction_id", "attempt_id", "dead_letter_id",
             "violation_id", "subject")
"""Record attributes copied into a JSON line when a log call names them."""

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def _cut(text: str) -> str:
    if len(text) <= MAX_LINE_CHARS:
        return text
    return f"{text[:MAX_LINE_CHARS]}... ({len(text) - MAX_LINE_CHARS} more characters)"


class JsonFormatter(logging.Formatter):
    """One JSON object per record; never raises (a message that cannot be formatted is
    logged as its raw template)."""

    def __init__(self, worker_id: str | None = None) -> None:
        super().__init__()
        self.worker_id = worker_id

    def format(self, record: logging.LogRecord) -> str:
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": _cut(message),
        }
        if self.worker_id:
            line["worker_id"] = self.worker_id
        for name in ID_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = str(value)
        if record.exc_info:
            line["error"] = _cut(self.formatException(record.exc_info))
        return json.dumps(line, ensure_ascii=False, default=str)


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return _cut(super().format(record))


BROKER_LOGGER = "workers.faststream"
"""The logger handed to FastStream's app and broker, so their lines go through ours."""


def set_worker_id(worker_id: str) -> None:
    """Name this process's worker in every JSON line from now on."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler.formatter, JsonFormatter):
            handler.formatter.worker_id = worker_id


def configure(fmt: LogFormat = LogFormat.TEXT, level: str = "INFO",
              worker_id: str | None = None) -> logging.Handler:
    """One handler on the root logger (stderr), and FastStream's loggers sent to it."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(worker_id) if fmt is LogFormat.JSON
                         else _TextFormatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # FastStream gives its loggers their own colouring handler and stops propagation;
    # take those off so its lines come out like every other line.
    for name in ("faststream", "faststream.access.nats"):
        logger = logging.getLogger(name)
        for old in list(logger.handlers):
            logger.removeHandler(old)
        logger.propagate = True
    return handler
