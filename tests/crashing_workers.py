"""`python -m tests.crashing_workers`: the workers, SIGKILLed at one named step.

CORRECTIONS_CRASH_AT=<step> (a step a correction passes: `before_execute_commit`,
`after_commit:executing`, ...; services.corrections names them) makes the process kill
itself the first time a correction reaches that step, so a test can show that nothing
is lost or doubled when a worker dies there. The product has only the seam
(workers.app.build_app's `crash`); the hook lives here, with the tests.
"""

from __future__ import annotations

import logging
import os
import signal

from services.corrections.policy import CrashHook, no_crash
from workers.__main__ import main

log = logging.getLogger(__name__)


def crash_at(step: str | None) -> CrashHook:
    if not step:
        return no_crash

    def crash(at: str) -> None:
        if at == step:
            log.warning("CORRECTIONS_CRASH_AT=%s: killing the worker (test hook)", at)
            os.kill(os.getpid(), signal.SIGKILL)

    return crash


if __name__ == "__main__":
    main(crash_at(os.environ.get("CORRECTIONS_CRASH_AT")))
