"""A message the recorder would not record, kept whole with every reason."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from contracts.rules import RuleViolation


def dead_letter_id(stream: str, stream_sequence: int) -> str:
    """Derived from the stream position, so a redelivered rejection is kept once."""
    return f"{stream}:{stream_sequence}"


class DeadLetter(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str = Field(description="'<stream>:<stream sequence>' of the rejected message.")
    subject: str = Field(description="Subject it was published on.")
    headers: dict[str, str] = Field(description="Its NATS headers.")
    payload: bytes = Field(description="The raw payload, byte for byte.")
    plan_id: str | None = Field(default=None, description="Its plan, when it could be read.")
    decision_id: str | None = Field(default=None, description="Its decision_id, if readable.")
    errors: list[RuleViolation] = Field(description="Every rule it broke.")
    rejected_at: datetime = Field(description="When it was rejected (UTC).")
    delivered: int = Field(default=1, description="How many times JetStream had delivered it.")
