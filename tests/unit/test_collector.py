"""The worker process's collector settings (workers.collector), applied in a process of
its own: they are process-wide, and this test process keeps its own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT
from workers.collector import THRESHOLDS

pytestmark = pytest.mark.unit


def test_tune_freezes_what_is_alive_and_raises_the_thresholds() -> None:
    code = ("import gc; from workers.collector import tune; tune(); "
            "print(*gc.get_threshold(), gc.get_freeze_count())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=60).stdout.split()
    assert tuple(int(v) for v in out[:3]) == THRESHOLDS
    assert int(out[3]) > 0
    assert THRESHOLDS[0] > 700  # CPython's default, which the recorder's batches outgrow
