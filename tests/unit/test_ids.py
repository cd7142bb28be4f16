"""`is_ulid` is a regular expression standing in for `ULID.from_str`: they must agree."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ulid import ULID

from contracts.shared.ids import is_ulid

pytestmark = pytest.mark.unit

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZabcdefghjkmnpqrstvwxyz"


def parses(value: str) -> bool:
    try:
        ULID.from_str(value)
    except (ValueError, TypeError):
        return False
    return True


@pytest.mark.parametrize("value", [
    "01M8PHHC265NGXEVBP6BTAEEWM", "01m8phhc265ngxevbp6btaeewn", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
    "00000000000000000000000000",
    "8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "01JD7X4Q9R8N2V5K3M6P1T0W7", "01JD7X4Q9R8N2V5K3M6P1T0W7YY",
    "01JD7X4Q9R8N2V5K3M6P1T0W7I", "01JD7X4Q9R8N2V5K3M6P1T0W7U", "01JD7X4Q9R8N2V5K3M6P1T0W7\n",
    "01JD7X4Q9R8N2V5K3M6P1T0W7Ａ", "０1JD7X4Q9R8N2V5K3M6P1T0W7Y", "", "01jd7x4q9r8n2v5k3m6p1t0w7y",
])
def test_agrees_with_the_ulid_library(value: str) -> None:
    assert is_ulid(value) is parses(value)


@given(st.one_of(st.text(alphabet=CROCKFORD + "ILOUilou\n Ａ-", min_size=24, max_size=28),
                 st.text(max_size=30)))
def test_agrees_with_the_ulid_library_on_any_text(value: str) -> None:
    assert is_ulid(value) is parses(value)


def test_not_a_string_is_not_a_ulid() -> None:
    assert not is_ulid(None)  # type: ignore[arg-type]
    assert not is_ulid(b"01JD7X4Q9R8N2V5K3M6P1T0W7Y")  # type: ignore[arg-type]
