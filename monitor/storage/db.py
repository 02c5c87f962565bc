"""The database seam: SQLite (embedded default) and PostgreSQL behind one interface.

SQL is written once, in PostgreSQL's ``$1, $2`` parameter style; for SQLite the markers
become ``?1, ?2`` (SQLite's numbered parameters), so no query is written twice. Keep SQL to
the common subset (TEXT, INTEGER/BIGINT, DOUBLE PRECISION, ``ON CONFLICT``,
``RETURNING``); where the dialects differ, branch on :attr:`Database.dialect`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiosqlite
import asyncpg

_PARAM = re.compile(r"\$(\d+)")

Row = dict[str, Any]


class Executor(Protocol):
    async def execute(self, sql: str, *args: Any) -> None: ...
    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...
    async def fetch(self, sql: str, *args: Any) -> list[Row]: ...
    async def fetchrow(self, sql: str, *args: Any) -> Row | None: ...
    async def fetchval(self, sql: str, *args: Any) -> Any: ...


class Database(Executor, Protocol):
    dialect: str  # "sqlite" or "postgresql"

    def transaction(self) -> Any:
        """``async with db.transaction() as tx:`` runs tx's statements atomically."""
        ...

    async def ping(self) -> bool: ...
    async def close(self) -> None: ...


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str  # statements separated by ";" at line ends


class _SqliteExecutor:
    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, *args: Any) -> None:
        await self._conn.execute(_PARAM.sub(r"?\1", sql), args)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._conn.executemany(_PARAM.sub(r"?\1", sql), rows)

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        async with self._conn.execute(_PARAM.sub(r"?\1", sql), args) as cur:
            rows = await cur.fetchall()
            names = [d[0] for d in cur.description or ()]
        return [dict(zip(names, row, strict=True)) for row in rows]

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        rows = await self.fetch(sql, *args)
        return rows[0] if rows else None

    async def fetchval(self, sql: str, *args: Any) -> Any:
        row = await self.fetchrow(sql, *args)
        return next(iter(row.values())) if row else None


class SqliteDatabase(_SqliteExecutor):
    """One connection in autocommit mode; a lock serialises transactions on it."""

    dialect = "sqlite"

    def __init__(self, conn: aiosqlite.Connection) -> None:
        super().__init__(conn)
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: str) -> SqliteDatabase:
        if path != ":memory:":
            Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        conn = await aiosqlite.connect(path, isolation_level=None)
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA synchronous=NORMAL")
        await conn.execute("PRAGMA foreign_keys=ON")
        await conn.execute("PRAGMA busy_timeout=5000")
        return cls(conn)

    async def execute(self, sql: str, *args: Any) -> None:
        async with self._lock:
            await super().execute(sql, *args)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        async with self._lock:
            await self._conn.execute("BEGIN")
            try:
                await super().executemany(sql, rows)
            except BaseException:
                await self._conn.execute("ROLLBACK")
                raise
            await self._conn.execute("COMMIT")

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        async with self._lock:
            return await super().fetch(sql, *args)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Executor]:
        async with self._lock:
            await self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteExecutor(self._conn)
            except BaseException:
                await self._conn.execute("ROLLBACK")
                raise
            await self._conn.execute("COMMIT")

    async def ping(self) -> bool:
        try:
            await self.fetchval("SELECT 1")
            return True
        except Exception:
            return False

    async def close(self) -> None:
        await self._conn.close()


class _PgExecutor:
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def execute(self, sql: str, *args: Any) -> None:
        await self._conn.execute(sql, *args)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._conn.executemany(sql, rows)

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return [dict(r) for r in await self._conn.fetch(sql, *args)]

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        row = await self._conn.fetchrow(sql, *args)
        return dict(row) if row is not None else None

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await self._conn.fetchval(sql, *args)


class PostgresDatabase(_PgExecutor):
    """An asyncpg pool; each call borrows a connection, transactions hold one."""

    dialect = "postgresql"

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        self._pool = pool

    @classmethod
    async def open(cls, url: str, min_size: int = 1, max_size: int = 10) -> PostgresDatabase:
        pool = await asyncpg.create_pool(url, min_size=min_size, max_size=max_size)
        return cls(pool)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.executemany(sql, rows)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Executor]:
        async with self._pool.acquire() as conn, conn.transaction():
            yield _PgExecutor(conn)

    async def ping(self) -> bool:
        try:
            await self._pool.fetchval("SELECT 1")
            return True
        except Exception:
            return False

    async def close(self) -> None:
        await self._pool.close()


async def connect(url: str) -> Database:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite://:memory:`` or
    ``postgresql://user@host:port/db``; empty: the SQLite file in the data directory
    (monitor/paths.py), never the current directory."""
    if not url:
        from ..paths import default_storage_url

        url = default_storage_url()
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://")
        path = path.removeprefix("/") if not path.startswith("//") else path[1:]
        return await SqliteDatabase.open(path or ":memory:")
    if url.startswith(("postgres://", "postgresql://")):
        return await PostgresDatabase.open(url)
    raise ValueError(f"unsupported storage url {url!r}: use sqlite:///FILE or postgresql://…")


#: PostgreSQL advisory lock key that serialises migrations ("depeg" in ASCII).
_MIGRATION_LOCK = 0x6465706567


async def migrate(db: Database, component: str, migrations: Sequence[Migration]) -> int:
    """Apply ``component``'s migrations newer than the recorded version; returns the version.

    Each component (webhooks, ratings, …) keeps its own version line in
    ``schema_migrations``, so they evolve independently. Processes sharing a database
    (``run`` starts the store writer and the API together; replicas roll out together)
    migrate at the same time, so the version is read and the migrations applied in one
    transaction that only one migrator holds at once: SQLite's ``BEGIN IMMEDIATE`` write
    lock, a transaction-scoped advisory lock on PostgreSQL. The others wait, then find
    the work done.
    """
    async with db.transaction() as tx:
        if db.dialect == "postgresql":
            await tx.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        await tx.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " component TEXT NOT NULL, version INTEGER NOT NULL, name TEXT NOT NULL,"
            " PRIMARY KEY (component, version))"
        )
        current = await tx.fetchval(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations WHERE component = $1",
            component,
        )
        version = int(current or 0)
        for m in sorted(migrations, key=lambda m: m.version):
            if m.version <= version:
                continue
            for statement in (s.strip() for s in m.sql.split(";\n")):
                if statement.strip(";").strip():
                    await tx.execute(statement)
            await tx.execute(
                "INSERT INTO schema_migrations (component, version, name) VALUES ($1, $2, $3)",
                component, m.version, m.name,
            )
            version = m.version
    return version
