"""The server backend: PostgreSQL through an asyncpg pool, plus one pinned connection for
the delivery worker's one-statement cycle (:meth:`PostgresDatabase.fetch_pinned`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from .db import Executor, Row

__all__ = ["PostgresDatabase"]


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

    #: Session settings of the pinned connection. The only statement run there is the
    #: delivery worker's cycle, whose due reads must walk the (status, next_attempt_at)
    #: index and stop at their LIMIT; with statistics older than a burst of new
    #: deliveries the planner joins and sorts the whole backlog instead (100+ ms per
    #: cycle on a 20k backlog, against 0.3 ms). A sort is still used where it is the only
    #: plan (a window over the few rows read). That sort's penalty cost then passes
    #: jit_above_cost, and JIT-compiling the statement took ~1 s per cycle: no JIT.
    PINNED_SETTINGS = "SET enable_sort = off; SET jit = off"

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        self._pool = pool
        self._pinned: Any = None  # a pool connection kept for fetch_pinned
        self._pinned_lock = asyncio.Lock()

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

    def pinned_pid(self) -> int | None:
        """The server process behind :meth:`fetch_pinned`'s connection, once it has one
        (for measuring that backend alone)."""
        return None if self._pinned is None else int(self._pinned.get_server_pid())

    async def fetch_pinned(self, sql: str, *args: Any) -> list[Any]:
        """``fetch`` (asyncpg records) on a pool connection this object keeps between
        calls, with :data:`PINNED_SETTINGS`: one round trip per call, where every pool
        call also waits for the pool's reset query when the connection goes back. For a
        hot single-statement path (the delivery worker's cycle). Calls run one at a time;
        after a failure the connection goes back to the pool (which drops it if it is
        broken) and the next call takes another."""
        async with self._pinned_lock:
            if self._pinned is None:
                conn = await self._pool.acquire()
                try:
                    await conn.execute(self.PINNED_SETTINGS)
                except BaseException:
                    await self._pool.release(conn)
                    raise
                self._pinned = conn
            try:
                rows: list[Any] = await self._pinned.fetch(sql, *args)
            except BaseException:
                conn, self._pinned = self._pinned, None
                await self._pool.release(conn)
                raise
            return rows

    async def close(self) -> None:
        async with self._pinned_lock:
            if self._pinned is not None:
                conn, self._pinned = self._pinned, None
                await self._pool.release(conn)
        await self._pool.close()
