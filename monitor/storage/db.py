"""The database seam: SQLite (embedded default) and PostgreSQL behind one interface.

SQL is written once, in PostgreSQL's ``$1, $2`` parameter style; for SQLite the markers
become ``?1, ?2`` (SQLite's numbered parameters), so no query is written twice. Keep SQL to
the common subset (TEXT, INTEGER/BIGINT, DOUBLE PRECISION, ``ON CONFLICT``,
``RETURNING``); where the dialects differ, branch on :attr:`Database.dialect`. The two
backends are :mod:`.sqlite` and :mod:`.postgres`; :func:`connect` picks one by URL.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

_PARAM = re.compile(r"\$(\d+)")


@functools.lru_cache(maxsize=1024)
def sqlite_sql(sql: str) -> str:
    """``sql`` with PostgreSQL's ``$n`` markers as SQLite's ``?n``. Cached: the same
    statements run over and over, and the substitution (~9 µs, a template expanded per
    marker) cost more than some of the statements themselves; a lookup is ~0.1 µs."""
    return _PARAM.sub(r"?\1", sql)


#: How long a SQLite statement waits for another connection's write lock.
BUSY_TIMEOUT_MS = 5000

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
    #: Statements separated by ";" at line ends; a mapping from dialect to its statements
    #: where the dialects need different DDL for one change (a table rebuild on SQLite).
    sql: str | Mapping[str, str]
    #: Run only on this dialect (storage tuning the other has no word for); elsewhere the
    #: version is recorded with nothing to do.
    dialect: str | None = None


async def connect(url: str) -> Database:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite://:memory:`` or
    ``postgresql://user@host:port/db``; empty: the SQLite file in the data directory
    (monitor/paths.py), never the current directory."""
    if not url:
        from ..paths import default_storage_url

        url = default_storage_url()
    if url.startswith("sqlite://"):
        # Imported here, not at the top: the backend modules import this one.
        from .sqlite import SqliteDatabase

        path = url.removeprefix("sqlite://")
        path = path.removeprefix("/") if not path.startswith("//") else path[1:]
        return await SqliteDatabase.open(path or ":memory:")
    if url.startswith(("postgres://", "postgresql://")):
        from .postgres import PostgresDatabase

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
            sql = m.sql if isinstance(m.sql, str) else m.sql.get(db.dialect, "")
            for statement in (s.strip() for s in sql.split(";\n")):
                if statement.strip(";").strip() and m.dialect in (None, db.dialect):
                    await tx.execute(statement)
            await tx.execute(
                "INSERT INTO schema_migrations (component, version, name) VALUES ($1, $2, $3)",
                component, m.version, m.name,
            )
            version = m.version
    return version
