"""Processes that share a database migrate it at the same time without failing.

``depeg-monitor run`` starts the store writer and the API together, and both migrate the
ratings tables; so do several replicas of one process at a rollout. Found by the live
operability check (tests/ops/test_live.py): one of them died with "table already exists".
"""

from __future__ import annotations

import asyncio

from monitor.storage import Migration, connect, migrate

MIGRATIONS = [
    Migration(1, "things", "CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"
                           "CREATE INDEX things_name ON things (name);\n"),
    Migration(2, "weight", "ALTER TABLE things ADD COLUMN weight DOUBLE PRECISION;\n"),
]


async def test_concurrent_migrations_apply_once(storage_url: str) -> None:
    dbs = [await connect(storage_url) for _ in range(4)]
    try:
        versions = await asyncio.gather(*(migrate(db, "race", MIGRATIONS) for db in dbs))
        assert versions == [2, 2, 2, 2]
        rows = await dbs[0].fetch(
            "SELECT version FROM schema_migrations WHERE component = $1 ORDER BY version",
            "race")
        assert [r["version"] for r in rows] == [1, 2]
        await dbs[1].execute("INSERT INTO things (id, name, weight) VALUES ($1, $2, $3)",
                             1, "a", 2.0)
    finally:
        for db in dbs:
            await db.close()
