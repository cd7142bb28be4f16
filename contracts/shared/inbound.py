"""One message as it came off a stream, before anything reads it.

Every consumer (the recorder, the correction and invariant workers, the clients'
validation) hands its readers this, so a reader sees the subject, headers and bytes the
same way whoever pulled them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Inbound:
    """One message as it came off the stream."""

    subject: str
    headers: Mapping[str, str]
    data: bytes
    stream_sequence: int
    delivered: int = 1
    stream_time: datetime | None = None
    """JetStream's timestamp of the message (when the stream stored it): the clock the
    signing time and created_at are judged against, the same for every worker."""
