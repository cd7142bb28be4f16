"""What a feed accepts: only what the consumer it asked for delivers, on a subject it
asked for.

A pull subscription's inbox receives whatever is published to it. nats-server does not
check a reply subject against the sender's permissions, so a principal can have the
server deliver to another's inbox (a request naming it as the reply subject), and a
push consumer's deliver subject is not checked either. nats-py hands such a message to
`fetch` like any other. So each feed checks each message before anything reads its
body: its subject must match one of the feed's filters, and its ack subject must name
the feed's own stream and consumer. Anything else is dropped (never acknowledged, never
answered: its reply subject is the sender's choice), logged once per feed, and counted.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from functools import lru_cache

from nats.aio.msg import Msg

log = logging.getLogger("clients")


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS matching: `*` is one token, a last `>` one or more."""
    return subject_matcher(pattern)(subject)


@lru_cache(maxsize=1024)
def subject_matcher(pattern: str) -> Callable[[str], bool]:
    """`subject_matches(pattern, ·)` as one compiled expression: a feed asks it of every
    message it takes, and comparing token by token in Python was 4 % of the recorder's
    CPU (tests/unit/test_inbox_and_feed_guard.py keeps that loop as the reference)."""
    parts: list[str] = []
    for token in pattern.split("."):
        if token == ">":
            parts.append(".*")  # after the dot before it: one or more tokens
            break
        parts.append("[^.]*" if token == "*" else re.escape(token))
    compiled = re.compile(r"\.".join(parts), re.DOTALL)
    return lambda subject: compiled.fullmatch(subject) is not None


def delivered_by(msg: Msg, stream: str, consumer: str) -> bool:
    """The message came from `consumer` on `stream` (its ack subject says so)."""
    try:
        meta = msg.metadata
    except Exception:  # no JetStream ack subject at all
        return False
    return meta.stream == stream and meta.consumer == consumer


class FeedGuard:
    """One feed's check: `accepts(msg)` is False for anything it did not ask for."""

    def __init__(self, name: str, filters: Sequence[str], stream: str,
                 consumer: str | None) -> None:
        self._name = name
        self._filters = [subject_matcher(f) for f in filters]
        self._stream = stream
        self._consumer = consumer
        self.dropped = 0
        """Messages refused so far (the first one is logged)."""

    def accepts(self, msg: Msg) -> bool:
        subject = msg.subject or ""
        ok = any(matches(subject) for matches in self._filters) and (
            self._consumer is None or delivered_by(msg, self._stream, self._consumer))
        if not ok:
            self.dropped += 1
            if self.dropped == 1:
                log.warning("%s dropped a message it did not ask for (subject %r, reply "
                            "%r): not from its consumer, or not on its subjects; further "
                            "ones are dropped without a word", self._name, subject[:120],
                            (msg.reply or "")[:120])
        return ok
