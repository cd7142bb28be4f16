"""The one base of every wire and domain model: immutable, and strict about fields.

Frozen, because a decision, an event or a plan is a fact once built: code that wants
another one builds it (`model_copy(update=...)`), so nothing is changed behind a
reader's back. `extra="forbid"`, because a field the model does not know is a typo or
an attacker's, never something to keep silently.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
