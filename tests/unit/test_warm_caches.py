"""The suite's warm-up (tests/warm_caches.py) reaches Hypothesis's internals by name and
gives up quietly if they move; this says so out loud instead, since a silent no-op would
only show as a slower suite."""

from __future__ import annotations

import importlib

import pytest

pytestmark = pytest.mark.unit


def test_the_hypothesis_internals_the_warm_up_uses_are_still_there() -> None:
    unicode = importlib.import_module("hypothesis.internal.charmap")
    constants = importlib.import_module("hypothesis.internal.constants_ast")
    assert callable(unicode.charmap)
    assert callable(unicode.intervals_from_codec)
    assert callable(constants.constants_from_module)
