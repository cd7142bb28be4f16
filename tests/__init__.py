"""The test suite.

Imported before any conftest (pytest imports tests/conftest.py as `tests.conftest`), so
the test processes take the worker process's collector thresholds (workers.collector)
before they import the project's stack: they run the workers' app in their own loop and
hold every collected test, and with CPython's defaults the collector took 11 % of the
xdist workers' CPU (14.9 s of 139.5 s in one run, measured with gc callbacks; 7.1 s
with the thresholds set only once the conftest's imports were done).
"""

import gc

from workers.collector import THRESHOLDS

gc.set_threshold(*THRESHOLDS)
