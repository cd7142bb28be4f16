"""What an audit finds: each broken link named (`Finding`), and the tally of records
verified, unsigned and written by the ledger itself (`Report`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contracts.trust.chain import Link

Line = Mapping[str, Any]
"""One record line of an export (contracts.trust.audit_lines)."""


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    plan_id: str
    seq: int | None
    kind: str
    record_id: str
    message: str

    def __str__(self) -> str:
        at = f"seq {self.seq}" if self.seq is not None else "unchained"
        return (f"{self.rule}: plan {self.plan_id} {at} {self.kind} {self.record_id}: "
                f"{self.message}")


@dataclass
class Report:
    plans: int = 0
    records: int = 0
    signed: int = 0
    ledger: int = 0
    unsigned: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    erased: list[str] = field(default_factory=list)
    """Records whose text an erasure removed (their kept digests verified)."""
    findings: list[Finding] = field(default_factory=list)
    keys_checked: bool = False

    @property
    def ok(self) -> bool:
        return not self.findings


def finding(rule: str, line: Line, message: str, seq: int | None = None) -> Finding:
    link = Link.of(line.get("chain"))
    return Finding(rule, str(line.get("plan_id")), link.seq if link else seq,
                   str(line.get("kind")), str(line.get("record_id")), message)
