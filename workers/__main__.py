"""`python -m workers`: run every worker against NATS_URL / MONGODB_URI."""

import asyncio
import logging

from workers.app import build_app


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(build_app().run())


if __name__ == "__main__":
    main()
