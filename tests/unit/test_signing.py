"""Signing and verifying one message: every way a signature is refused has its rule."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from contracts.recording.families import RECORDED
from contracts.shared.ids import new_id
from contracts.shared.roles import Role
from contracts.shared.rules import Rule
from contracts.trust.policy import FamilyTrust, TrustPolicy
from contracts.trust.principals import Directory
from contracts.trust.signing import SIG_HEADER, b64url, field_digests
from contracts.trust.verification import Refusal, Verified, verify_message
from tests.trust_support import directory, member

AGENT = member("billing-agent", Role.AGENT)
OTHER = member("other-agent", Role.AGENT)
OPS = member("alice", Role.OPERATOR, "billing")
NOW = datetime.now(UTC)
SKEW = timedelta(seconds=300)
KIND = RECORDED.name


def _body() -> dict[str, object]:
    return {"decision_id": new_id(), "plan_id": new_id(), "question": "Which?",
            "chosen_option": "é\u2028 this", "confidence_score": 0.8,
            "alternatives_considered": ["a", "b"], "context_snapshot": {"x": [1, None]}}


def check(headers: dict[str, str], data: bytes, subject: str, *,
          d: Directory | None = None, at: datetime = NOW, kind: str = KIND,
          roles: frozenset[Role] = frozenset({Role.AGENT})) -> Verified | Refusal:
    return verify_message(headers, kind=kind, subject=subject, data=data,
                          directory=d or directory(AGENT, OTHER, OPS), stream_time=at,
                          max_skew=SKEW, roles=roles)


def signed(body: dict[str, object] | None = None) -> tuple[bytes, dict[str, str], str]:
    body = body or _body()
    subject = f"decisions.recorded.{body['plan_id']}"
    data, headers = AGENT.signed(KIND, subject, str(body["decision_id"]), body, now=NOW)
    return data, headers, subject


def test_a_signed_message_names_its_principal_and_keeps_its_signature() -> None:
    data, headers, subject = signed()
    v = check(headers, data, subject)
    assert isinstance(v, Verified) and v.principal.name == AGENT.name
    assert v.signature.key == AGENT.public and v.signature.principal == AGENT.name
    assert set(v.signature.fields) == set(json.loads(data))
    assert v.signature.sig == headers[SIG_HEADER]


def test_a_flipped_byte_in_any_field_is_a_bad_signature() -> None:
    data, headers, subject = signed()
    body = json.loads(data)
    for name, value in body.items():
        changed = {**body, name: (value + "x") if isinstance(value, str) else [value]}
        v = check(headers, json.dumps(changed).encode(), subject)
        assert isinstance(v, Refusal) and v.rule is Rule.BAD_SIGNATURE, name
    # A field added or dropped changes the digests' map as well.
    for changed in ({**body, "rationale": "extra"}, {k: body[k] for k in list(body)[1:]}):
        v = check(headers, json.dumps(changed).encode(), subject)
        assert isinstance(v, Refusal) and v.rule is Rule.BAD_SIGNATURE


def test_the_same_body_written_otherwise_still_verifies() -> None:
    # Canonical bytes: key order and spacing of the JSON sent do not matter.
    data, headers, subject = signed()
    body = json.loads(data)
    again = json.dumps(dict(reversed(body.items())), indent=2).encode()
    assert isinstance(check(headers, again, subject), Verified)


def test_moved_to_another_subject_or_kind_or_msg_id_is_a_bad_signature() -> None:
    data, headers, subject = signed()
    for h, s, kind in ((headers, f"decisions.recorded.{new_id()}", KIND),
                       (headers, subject, "invariants.violations"),
                       ({**headers, "Nats-Msg-Id": new_id()}, subject, KIND)):
        v = check(h, data, s, kind=kind)
        assert isinstance(v, Refusal) and v.rule is Rule.BAD_SIGNATURE


def test_replayed_under_another_principals_key_is_a_bad_signature() -> None:
    data, headers, subject = signed()
    v = check({**headers, "Ledger-Key": OTHER.public}, data, subject)
    assert isinstance(v, Refusal) and v.rule is Rule.BAD_SIGNATURE


def test_unknown_and_revoked_keys() -> None:
    data, headers, subject = signed()
    v = check(headers, data, subject, d=directory(OTHER))
    assert isinstance(v, Refusal) and v.rule is Rule.UNKNOWN_KEY
    revoked = Directory(principals=(AGENT.principal(revoked_at=NOW - timedelta(seconds=60)),))
    v = check(headers, data, subject, d=revoked)
    assert isinstance(v, Refusal) and v.rule is Rule.KEY_REVOKED
    # Signed before the revocation: still the principal's (old records verify).
    later = Directory(principals=(AGENT.principal(revoked_at=NOW + timedelta(hours=1)),))
    assert isinstance(check(headers, data, subject, d=later), Verified)


def test_signed_at_far_from_the_streams_time_is_refused() -> None:
    data, headers, subject = signed()
    for at in (NOW + timedelta(seconds=301), NOW - timedelta(seconds=301)):
        v = check(headers, data, subject, at=at)
        assert isinstance(v, Refusal) and v.rule is Rule.SIGNED_AT_SKEW


def test_a_role_that_does_not_send_the_family_is_refused() -> None:
    data, headers, subject = signed()
    v = check(headers, data, subject, roles=frozenset({Role.OPERATOR}))
    assert isinstance(v, Refusal) and v.rule is Rule.WRONG_ROLE


@pytest.mark.parametrize("garbage", [
    {"Ledger-Key": "U" * 10_000},
    {"Ledger-Sig": "!!!" * 30},
    {"Ledger-Sig": b64url(b"x" * 63) + "A"},
    {"Ledger-Salt": "A" * 22 + "="},
    {"Ledger-Salt": "%%%%%%%%%%%%%%%%%%%%%%"},
    {"Ledger-Signed-At": "yesterday"},
    {"Ledger-Signed-At": "2026-13-45T99:99:99.999Z"},
    {"Ledger-Key": None},
])
def test_garbage_headers_are_bad_signatures_never_exceptions(garbage: dict[str, str]) -> None:
    data, headers, subject = signed()
    headers = {k: v for k, v in {**headers, **garbage}.items() if v is not None}
    v = check(headers, data, subject)
    assert isinstance(v, Refusal) and v.rule is Rule.BAD_SIGNATURE
    assert len(v.message) < 300


@pytest.mark.parametrize("data", [b"\xff\xfe", b"[1,2]", b"{" * 5000, b"x" * 100_000])
def test_garbage_bodies_are_refused_never_raised(data: bytes) -> None:
    _, headers, subject = signed()
    v = check(headers, data, subject)
    assert isinstance(v, Refusal) and v.rule is Rule.BAD_SIGNATURE


def test_unsigned_is_refused_only_where_signatures_are_required() -> None:
    family = FamilyTrust(KIND, frozenset({Role.AGENT}),
                         TrustPolicy(directory(AGENT), required=False))
    assert family.identify({}, "decisions.recorded.x", b"{}", NOW) is None
    strict = FamilyTrust(KIND, frozenset({Role.AGENT}),
                         TrustPolicy(directory(AGENT), required=True))
    v = strict.identify({}, "decisions.recorded.x", b"{}", NOW)
    assert not isinstance(v, Verified) and v is not None and v.rule is Rule.UNSIGNED


def test_without_a_principals_file_nothing_is_verified() -> None:
    data, headers, subject = signed()
    family = FamilyTrust(KIND, frozenset({Role.AGENT}), TrustPolicy())
    assert family.identify(headers, subject, data, NOW) is None
    with pytest.raises(ValueError, match="LEDGER_PRINCIPALS"):
        TrustPolicy(required=True)


def test_digests_are_salted_per_message() -> None:
    body = {"approved": True}
    assert field_digests(b"a" * 16, body) != field_digests(b"b" * 16, body)
