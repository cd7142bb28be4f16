"""Why an operator's command was not sent, or a dry run has no report."""

from __future__ import annotations

from contracts.corrections.refusals import DryRunError
from contracts.shared.rules import RuleViolation


class InvalidCorrection(Exception):
    """The request breaks the contract (blank or over-long guidance, a bad ID); not sent."""

    def __init__(self, violations: list[RuleViolation]) -> None:
        self.violations = tuple(violations)
        super().__init__("; ".join(str(v) for v in self.violations))


class DryRunRefused(Exception):
    """The ledger answered the dry run with a DryRunError: no report can be made.

    `code` is `target_not_found`, `target_in_other_plan`, `target_superseded` (the
    correction itself would FAIL the same way), `invalid_request` or `internal_error`.
    """

    def __init__(self, error: DryRunError) -> None:
        self.error = error
        self.code = error.error
        super().__init__(f"{error.error}: {error.message}")


class LedgerUnavailable(Exception):
    """No worker answered a dry run (none running, or all busy past the timeout)."""
