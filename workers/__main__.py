"""`python -m workers`: run every worker against NATS_URL / MONGODB_URI.

A server that cannot be reached at start ends the process with exit code 1 and one
line on stderr naming the variable to fix (see bootstrap.reachability).
"""

import asyncio
import sys

from bootstrap.reachability import StartupFailed
from bootstrap.settings import Settings
from services.corrections.policy import CrashHook, no_crash
from workers.app import build_app
from workers.collector import tune
from workers.logs import configure
from workers.telemetry import configure_tracing


def main(crash: CrashHook = no_crash) -> None:
    """Run the workers; `crash` is the fault-injection seam of build_app (tests only)."""
    try:
        settings = Settings.from_env()
    except ValueError as exc:
        sys.exit(f"error: bad value in the environment: {exc}")
    configure(settings.log_format, settings.log_level)
    flush_traces = configure_tracing()
    try:
        app = build_app(settings, crash)
        tune()
        asyncio.run(app.run())
    except StartupFailed as exc:
        sys.exit(f"error: {exc}")
    finally:
        flush_traces()


if __name__ == "__main__":
    main()
