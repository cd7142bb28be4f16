"""`python -m workers`: run every worker against NATS_URL / MONGODB_URI.

A server that cannot be reached at start ends the process with exit code 1 and one
line on stderr naming the variable to fix (see workers.connections).
"""

import asyncio
import logging
import sys

from workers.app import build_app
from workers.connections import StartupFailed
from workers.settings import Settings


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        settings = Settings.from_env()
    except ValueError as exc:
        sys.exit(f"error: bad value in the environment: {exc}")
    try:
        asyncio.run(build_app(settings).run())
    except StartupFailed as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
