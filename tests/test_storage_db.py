"""The storage seam behaves the same on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg

from monitor.storage import Migration, connect, migrate
from monitor.storage.postgres import PostgresDatabase

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


async def test_numbered_markers_bind_by_number_past_nine_and_when_repeated(
        storage_url: str) -> None:
    """``$10`` is the tenth argument, not ``$1`` followed by a 0, and a marker used twice
    binds the same argument both times, on SQLite (translated to ``?n``, once per
    statement text) as on PostgreSQL; the second run of the same text binds anew."""
    db = await connect(storage_url)
    try:
        sql = ("SELECT $11 || '-' || $10 || '-' || $1 || '-' || $1 AS joined"
               " WHERE $2 = $3 OR $4 = $5 OR $6 = $7 OR $8 = $9 OR TRUE")
        for n in range(2):
            args = [f"a{i}-{n}" for i in range(1, 12)]
            assert await db.fetchval(sql, *args) == f"a11-{n}-a10-{n}-a1-{n}-a1-{n}"
    finally:
        await db.close()


async def test_pinned_connection_survives_a_failed_statement_and_is_released(
        pg_url: str) -> None:
    """The worker's cycle runs on one kept connection; a failing statement must not leave
    it unusable (the next call takes another) and close() must give it back (the pool's
    close waits for every borrowed connection)."""
    db = await connect(pg_url)
    assert isinstance(db, PostgresDatabase)
    try:
        first = await db.fetch_pinned("SELECT pg_backend_pid() AS pid,"
                                      " current_setting('enable_sort') AS sort,"
                                      " current_setting('jit') AS jit")
        assert (first[0]["sort"], first[0]["jit"]) == ("off", "off")
        # Kept: the same server process answers the next call.
        again = await db.fetch_pinned("SELECT pg_backend_pid() AS pid")
        assert again[0]["pid"] == first[0]["pid"]
        try:
            await db.fetch_pinned("SELECT 1 / 0")
        except asyncpg.DivisionByZeroError:
            pass
        after = await db.fetch_pinned("SELECT current_setting('enable_sort') AS sort")
        assert after[0]["sort"] == "off"
        # Other queries never see the pinned connection's settings.
        assert await db.fetchval("SELECT current_setting('enable_sort')") == "on"
    finally:
        await asyncio.wait_for(db.close(), 30)


async def test_a_new_sqlite_file_opens_while_another_connection_writes(tmp_path: Path) -> None:
    """`run`'s services open one new database file together: switching it to WAL while
    another connection is in a write transaction (a migration) must wait for it, not fail
    (SQLite answers "database is locked" at once there, without its busy handler)."""
    import sqlite3

    path = tmp_path / "shared.sqlite"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE t (x INTEGER)")
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO t VALUES (1)")
    opening = asyncio.create_task(connect(f"sqlite:///{path}"))
    # The writer holds its lock for a while (not a wait for a result): the open meets it.
    await asyncio.sleep(0.2)
    writer.execute("COMMIT")
    db = await opening
    try:
        assert [r["journal_mode"] for r in await db.fetch("PRAGMA journal_mode")] == ["wal"]
        assert [r["x"] for r in await db.fetch("SELECT x FROM t")] == [1]
    finally:
        await db.close()
        writer.close()
