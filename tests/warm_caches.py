"""Hypothesis's on-disk caches, filled once before the xdist workers need them.

The first Hypothesis test in a process builds tables of Unicode categories and of what
UTF-8 can encode (one loop over every code point), and reads every local module's source
for constants worth trying; all are kept under `.hypothesis/`. In a fresh clone each of
the six xdist workers built them on its own, 2 s of CPU apiece alone and 5-7 s for the
first text-drawing test of a loaded run; filled once by the controller, the workers only
read them.

Both functions are Hypothesis internals, so nothing here may fail a run: if they move,
the warm-up is skipped and each worker builds its caches as before.
"""

from __future__ import annotations

import importlib
import threading
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCAL_PACKAGES = ("contracts", "store", "services", "workers", "cli", "clients", "console",
                  "deploy", "tests")


def warm_hypothesis_caches() -> None:
    try:
        unicode = importlib.import_module("hypothesis.internal.charmap")
        constants_from_module = importlib.import_module(
            "hypothesis.internal.constants_ast").constants_from_module
        unicode.charmap()
        unicode.intervals_from_codec("utf-8")  # text() leaves out what UTF-8 cannot encode
        for package in LOCAL_PACKAGES:
            for source in sorted((ROOT / package).rglob("*.py")):
                module = types.ModuleType(source.stem)
                module.__file__ = str(source)
                constants_from_module(module)
    except Exception:  # a cache left cold only costs time
        return


def warm_in_background() -> threading.Thread:
    """Started while the workers spawn and collect (several seconds), so the controller's
    warm-up delays nothing; a worker that gets there first just builds its own."""
    thread = threading.Thread(target=warm_hypothesis_caches, name="warm-hypothesis",
                              daemon=True)
    thread.start()
    return thread
