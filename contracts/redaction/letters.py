"""Redacting a dead letter's payload before it is kept.

A dead letter keeps the raw bytes of a message the workers would not process, shown to
every operator by the CLI and the console: the same rules apply to it as to a decision.
The payload is scanned as text (UTF-8; bytes that are not are carried through as they
are, `surrogateescape`), whatever it is: a hostile body need not be JSON. `payload_size`
and `payload_sha256` stay those of the message as received (they identify it; the hash
of a whole body is no way back to a part of it). A redacted letter says so
(`redactions`); retrying it republishes the redacted body, which a signed message's
signature no longer covers (`bad_signature`), so such a letter is for reading.
"""

from __future__ import annotations

from contracts.redaction.rules import Rules
from contracts.redaction.text import Marks, redact_text
from contracts.shared.dead_letter import DeadLetter


def redact_letter(rules: Rules, letter: DeadLetter) -> DeadLetter:
    """The letter with its payload redacted (itself when nothing matched)."""
    if rules.scanner is None or not letter.payload:
        return letter
    text = letter.payload.decode("utf-8", "surrogateescape")
    marks = Marks()
    new = redact_text(rules, text, "payload", marks)
    if not marks:
        return letter
    return letter.model_copy(update={
        "payload": new.encode("utf-8", "surrogateescape"),
        "redactions": [m.as_document() for m in marks.result()]})
