"""The canonical bytes signatures are over: the fast path is RFC 8785, byte for byte."""

from __future__ import annotations

import json
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.trust.canonical import canonical
from tests.properties import examples

SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text())
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=5)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=5), max_leaves=30)


@settings(max_examples=examples(300))
@given(JSON)
def test_the_fast_path_writes_what_rfc8785_writes(value: Any) -> None:
    assert canonical(value) == rfc8785.dumps(value)


@settings(max_examples=examples(500))
@given(JSON)
def test_a_value_read_back_from_json_canonicalises_the_same(value: Any) -> None:
    # What a verifier parses from the body is what the signer digested.
    assert canonical(json.loads(json.dumps(value))) == canonical(value)


@pytest.mark.parametrize("value", [
    "é\u2028\x7f\x00\x1f\"\\", {"\U0001f600": 1, "\ue000": 2, "a": 3}, 1e21, 1e-7, -0.0,
    5e-324, 123456789012345680000.0, [0.1, 1.0, 1e16, 9007199254740991],
    {"a": [1.0, {"b": 1e-05}], "c": "x"}, {"\ue000": "x", "\U0001f600": "y", "b": [True]},
    {"d": "sha256:3e5", "e": "x,1.5", "f": [None, -(2**53) + 1, {"g": []}]}, [[], {}]])
def test_edge_values(value: Any) -> None:
    assert canonical(value) == rfc8785.dumps(value)


@pytest.mark.parametrize("value", [float("nan"), 2**53, "\ud800", {"a": [2**53]},
                                   {"a": {"b": "\ud800"}}, [float("inf")]])
def test_what_jcs_cannot_write_is_refused(value: Any) -> None:
    with pytest.raises(ValueError):
        canonical(value)
