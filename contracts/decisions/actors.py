"""What made a decision, as the agent says of itself: its software and its model.

Signed with the rest of the message, so a record shows them beside the principal the
ledger verified (`recorded_by`): the principal is who is answerable for the decision,
these say what produced it (for the record-keeping an audit of AI systems asks for).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from contracts.shared.base import Frozen
from contracts.trust.principals import NAME_PATTERN

Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
PrincipalName = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]


class AgentIdentity(Frozen):
    name: Label = Field(description="The agent's name, e.g. billing-agent.",
                        examples=["billing-agent"])
    version: Label | None = Field(default=None, description="Its version, e.g. 2.3.1.")


class ModelIdentity(Frozen):
    provider: Label = Field(description="Who serves the model, e.g. anthropic.",
                            examples=["anthropic"])
    name: Label = Field(description="The model's name as the provider gives it.",
                        examples=["claude-sonnet-4-5"])
