"""Give decisions recorded before search existed their search tokens (store.search_backfill),
against the database the environment names, as the workers read it:

    .venv/bin/python -m bootstrap.search_backfill
"""

from __future__ import annotations

import asyncio

from bootstrap.settings import Settings
from store.database import connect
from store.search_backfill import backfill


async def main() -> None:
    settings = Settings.from_env()
    client = connect(settings.mongodb_uri)
    try:
        print(f"{await backfill(client[settings.mongodb_db])} decision(s) given search tokens")
    finally:
        await client.close()


if __name__ == "__main__":
    asyncio.run(main())
