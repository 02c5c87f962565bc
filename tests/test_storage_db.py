"""The storage seam behaves the same on SQLite and PostgreSQL."""

from __future__ import annotations

from monitor.storage import Migration, connect, migrate

MIGRATIONS = [
    Migration(1, "things", "CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT NOT NULL);\n"),
    Migration(2, "weight", "ALTER TABLE things ADD COLUMN weight DOUBLE PRECISION;\n"),
]


async def test_migrate_and_query(storage_url: str) -> None:
    db = await connect(storage_url)
    try:
        assert await migrate(db, "demo", MIGRATIONS[:1]) == 1
        assert await migrate(db, "demo", MIGRATIONS) == 2
        assert await migrate(db, "demo", MIGRATIONS) == 2  # idempotent
        await db.execute("INSERT INTO things (id, name, weight) VALUES ($1, $2, $3)", 1, "a", 1.5)
        await db.executemany("INSERT INTO things (id, name) VALUES ($1, $2)", [(2, "b"), (3, "c")])
        rows = await db.fetch("SELECT id, name FROM things WHERE id >= $1 ORDER BY id", 2)
        assert rows == [{"id": 2, "name": "b"}, {"id": 3, "name": "c"}]
        assert await db.fetchval("SELECT weight FROM things WHERE id = $1", 1) == 1.5
        try:
            async with db.transaction() as tx:
                await tx.execute("INSERT INTO things (id, name) VALUES ($1, $2)", 4, "d")
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        assert await db.fetchval("SELECT COUNT(*) FROM things") == 3
        assert await db.ping()
    finally:
        await db.close()
