"""The embedded backend: one SQLite file (WAL mode), one connection behind a lock.

Statements come in PostgreSQL's ``$n`` style and run as SQLite's ``?n``
(:func:`~monitor.storage.db.sqlite_sql`); :meth:`SqliteDatabase.run_sync` runs a batch of
sqlite3 calls as one transaction for the hot paths (the delivery worker's cycle).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from .db import BUSY_TIMEOUT_MS, Executor, Row, sqlite_sql

__all__ = ["SqliteDatabase"]

T = TypeVar("T")


class _SqliteExecutor:
    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, *args: Any) -> None:
        await self._conn.execute(sqlite_sql(sql), args)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._conn.executemany(sqlite_sql(sql), rows)

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        async with self._conn.execute(sqlite_sql(sql), args) as cur:
            rows = await cur.fetchall()
            names = [d[0] for d in cur.description or ()]
        return [dict(zip(names, row, strict=True)) for row in rows]

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        rows = await self.fetch(sql, *args)
        return rows[0] if rows else None

    async def fetchval(self, sql: str, *args: Any) -> Any:
        row = await self.fetchrow(sql, *args)
        return next(iter(row.values())) if row else None


async def _use_wal(conn: aiosqlite.Connection) -> None:
    """Put the file in WAL mode (it stays so). Switching needs the file to itself, and
    SQLite answers "database is locked" at once, without its busy handler, while another
    connection writes: `run`'s services open a new file together and one of them may be
    migrating. So the switch is retried for up to the busy timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BUSY_TIMEOUT_MS / 1000
    pause = 0.005
    while True:
        try:
            await conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or loop.time() >= deadline:
                raise
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.1)


class SqliteDatabase(_SqliteExecutor):
    """One connection in autocommit mode; a lock serialises transactions on it."""

    dialect = "sqlite"

    def __init__(self, conn: aiosqlite.Connection) -> None:
        super().__init__(conn)
        self._lock = asyncio.Lock()
        #: The thread ``run_sync`` runs batches on: its own, not the loop's default
        #: executor, where a slow name lookup (the HTTP client's) could hold it up.
        self._batches: ThreadPoolExecutor | None = None

    @classmethod
    async def open(cls, path: str) -> SqliteDatabase:
        if path != ":memory:":
            Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # check_same_thread=False: run_sync uses the connection from the loop's thread or
        # a thread of its own (never at the same time as aiosqlite's: all behind the lock).
        conn = await aiosqlite.connect(path, isolation_level=None, check_same_thread=False)
        await conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        await _use_wal(conn)
        await conn.execute("PRAGMA synchronous=NORMAL")
        await conn.execute("PRAGMA foreign_keys=ON")
        # Savepoint and statement journals in memory, not in a temp file: SQLite keeps
        # them in memory only up to 64 KiB, and the delivery worker's cycle wraps each
        # batch of outcomes in a SAVEPOINT (delivery_batches._record_outcomes) whose
        # journal passes that within a few dozen rows. Spilled, every page the batch
        # first touched was also written to that file: the outcome UPDATE cost twice as
        # much (docs/performance.md, twenty-seventh pass). Nothing here sorts or builds
        # temporary tables of a size that would matter in memory; nothing runs VACUUM.
        await conn.execute("PRAGMA temp_store=MEMORY")
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

    async def run_sync(self, work: Callable[[sqlite3.Connection], T], *,
                       on_thread: bool = False) -> T:
        """Run ``work`` on the sqlite3 connection as ONE transaction (``BEGIN IMMEDIATE``
        ... ``COMMIT``, rolled back if it raises), in one go.

        For hot paths made of many small statements (the delivery worker's cycle).
        Through aiosqlite each statement is a hop to its thread and back, and the two
        threads then fight over the GIL: a batch of ~1 ms of SQLite work took ~9 ms.
        Here the batch runs on the event loop's own thread, costing its CPU time and
        nothing more; or, ``on_thread``, in one hop to a thread of its own, the loop
        going on meanwhile (sqlite3 lets go of the GIL while SQLite works): for a big
        batch while the loop has other work, such as a busy delivery worker's sends
        and answers, which then overlap its database work on a second core. The hop
        there and back costs ~100-150 µs of CPU on the 2-core machines measured, five
        to ten times a small batch (``benchmarks/bench_sqlite_batches.py``).

        On the loop's thread the write lock is asked for without waiting (another
        process holding it would otherwise block the loop for up to ``busy_timeout``);
        when it is taken, the batch goes to the thread instead, waiting there as every
        other statement would. ``work`` uses ``?n`` parameters (sqlite3's own style),
        must not keep the connection and must not touch the event loop's objects. A
        batch on the thread runs to its end: a cancellation meanwhile goes on when it
        has, and what it committed stays committed (a delivery cycle cancelled so: its
        claims wait for their lease, as after a crash).
        """
        def transaction(conn: sqlite3.Connection) -> T:
            try:
                result = work(conn)
                conn.execute("COMMIT")
            except BaseException:
                # Also when COMMIT itself fails: never leave the shared connection
                # inside a transaction.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return result

        def elsewhere(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN IMMEDIATE")
            return transaction(conn)

        async with self._lock:
            # The lock keeps aiosqlite's thread off the connection meanwhile; it is opened
            # with check_same_thread=False for this. ``_conn`` is aiosqlite's (long-standing,
            # underscore-named) handle on it: aiosqlite has no public one.
            conn: sqlite3.Connection = self._conn._conn
            if not on_thread and _begin_without_waiting(conn):
                return transaction(conn)
            if self._batches is None:
                self._batches = ThreadPoolExecutor(1, thread_name_prefix="sqlite-batches")
            loop = asyncio.get_running_loop()
            return await _to_the_end(loop.run_in_executor(self._batches, elsewhere, conn))

    async def ping(self) -> bool:
        try:
            await self.fetchval("SELECT 1")
            return True
        except Exception:
            return False

    async def close(self) -> None:
        if self._batches is not None:
            # Idle unless a batch's caller is still waiting for it (``_to_the_end``).
            self._batches.shutdown(wait=False)
            self._batches = None
        await self._conn.close()


def _begin_without_waiting(conn: sqlite3.Connection) -> bool:
    """``BEGIN IMMEDIATE`` unless another connection holds the write lock (False then)."""
    conn.execute("PRAGMA busy_timeout=0")
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return True


async def _to_the_end(running: asyncio.Future[T]) -> T:
    """``running``'s result. A cancellation meanwhile waits for it to end (a thread's work
    cannot be stopped halfway, and the connection is nobody else's until it has), then
    goes on as it came: what the work committed stays committed."""
    cancelled: asyncio.CancelledError | None = None
    while not running.done():
        try:
            await asyncio.wait((running,))  # unlike ``await running``, never cancels it
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is not None:
        raise cancelled
    return running.result()
