"""What redaction costs the recorder per 1,000 decisions, beside what reading them costs
anyway, in one run (docs/retention.md, Redaction).

    python bench/bench_redaction.py [--decisions 5000]

For the bench's ordinary decisions (nothing to redact: the fast path, one scan of their
strings joined) and for the same decisions each carrying an e-mail address and an API
key in their rationale (the slow path: field by field, the model rebuilt), it times, in
this process, reading the JSON as the recorder does (`Decision.model_validate_json`) and
then redacting with every built-in detector, and prints seconds of CPU per 1,000
decisions and redaction as a share of the read.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from contracts.decisions.model import Decision
from contracts.redaction.decisions import redact_decision
from contracts.redaction.rules import Rules
from tests.factories import plan_tree


def _timed(rules: Rules, bodies: list[bytes]) -> tuple[float, float, int]:
    """(read s/1000, redact s/1000, decisions redacted)."""
    start = time.process_time()
    decisions = [Decision.model_validate_json(b) for b in bodies]
    read = time.process_time() - start
    start = time.process_time()
    redacted = sum(1 for d in decisions if redact_decision(rules, d)[1])
    spent = time.process_time() - start
    n = len(bodies)
    return read * 1000 / n, spent * 1000 / n, redacted


def _with_secrets(d: dict[str, Any], i: int) -> dict[str, Any]:
    return {**d, "rationale": f"{d.get('rationale')} mail ops{i}@example.com, key "
            f"sk-proj-{i:08d}abcdefghijklmnopqrstu"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=5000)
    args = parser.parse_args()
    plain = plan_tree(args.decisions, seed=3)
    cases = {"nothing to redact": plain,
             "two secrets each": [_with_secrets(d, i) for i, d in enumerate(plain)]}
    print(f"Redaction bench: {args.decisions} decisions, every built-in detector, "
          "CPU seconds per 1,000 decisions (this process)\n")
    print(f"{'decisions':<20} {'read':>8} {'redact':>8} {'redact/read':>12} {'redacted':>9}")
    for name, ds in cases.items():
        bodies = [json.dumps(d).encode() for d in ds]
        _timed(Rules(), bodies[:200])  # warm up
        read, spent, redacted = _timed(Rules(), bodies)
        print(f"{name:<20} {read:>8.3f} {spent:>8.3f} {spent / read:>11.0%} {redacted:>9}")


if __name__ == "__main__":
    main()
