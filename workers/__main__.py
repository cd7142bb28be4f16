"""`python -m workers`: run every worker against NATS_URL / MONGODB_URI.

A server that cannot be reached at start ends the process with exit code 1 and one
line on stderr naming the variable to fix (see workers.connections).
"""

import asyncio
import sys

from workers.app import build_app
from workers.connections import StartupFailed
from workers.logs import configure
from workers.settings import Settings


def main() -> None:
    try:
        settings = Settings.from_env()
    except ValueError as exc:
        sys.exit(f"error: bad value in the environment: {exc}")
    configure(settings.log_format, settings.log_level)
    try:
        asyncio.run(build_app(settings).run())
    except StartupFailed as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
