"""The test vectors docs/security.md gives for a verifier in another language: computed
here, and the document must show exactly these (run with -s to print them)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import nkeys

from contracts.trust.signing import (
    SIG_HEADER,
    Signer,
    field_digests,
    format_signed_at,
    signed_bytes,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
SEED = bytes(nkeys.encode_seed(bytes(range(32)), nkeys.PREFIX_BYTE_USER))
SALT = bytes(range(16))
AT = datetime(2026, 1, 1, tzinfo=UTC)
PLAN, DECISION = "01JD7X4Q9R8N2V5K3M6P1T0W7Z", "01JD7X4Q9R8N2V5K3M6P1T0W7Y"
BODY = {"decision_id": DECISION, "plan_id": PLAN, "question": "Which store?",
        "confidence_score": 0.8, "alternatives_considered": ["Redis", "Postgres"]}


def vectors() -> dict[str, str]:
    signer = Signer(SEED)
    subject = f"decisions.recorded.{PLAN}"
    data = json.dumps(BODY).encode()
    headers = signer.headers(kind="decisions.recorded", subject=subject, msg_id=DECISION,
                             body=data, now=AT, salt=SALT)
    fields = field_digests(SALT, BODY)
    message = signed_bytes(kind="decisions.recorded", subject=subject, msg_id=DECISION,
                           signed_at=format_signed_at(AT), key=signer.public_key,
                           fields=fields)
    return {"seed": SEED.decode(), "key": signer.public_key,
            "digest(question)": fields["question"],
            "digest(confidence_score)": fields["confidence_score"],
            "signed bytes": message.decode(), "Ledger-Sig": headers[SIG_HEADER]}


def test_the_documented_vectors_are_the_computed_ones() -> None:
    text = DOC.read_text()
    for name, value in vectors().items():
        print(f"{name}: {value}")
        assert value in text, f"docs/security.md lacks {name}: {value}"
