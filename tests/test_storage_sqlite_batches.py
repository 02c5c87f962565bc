"""``SqliteDatabase.run_sync``: a batch of statements as one transaction, on the event
loop's thread or (``on_thread``) on a thread of its own.

The delivery worker's cycle runs there. What its callers rely on: with ``on_thread`` the
event loop keeps running while a batch works (a busy worker's sends and answers go on);
either way a batch that raises leaves nothing behind and a batch waits for another
connection's write lock instead of failing; and a batch on the thread runs to its end
even when its caller is cancelled (the connection is nobody else's meanwhile, what it
committed stays committed, and the cancellation then goes on as it came).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from monitor.storage import connect
from monitor.storage.sqlite import SqliteDatabase


async def open_db(tmp_path: Path) -> SqliteDatabase:
    db = await connect(f"sqlite:///{tmp_path / 'batches.sqlite'}")
    assert isinstance(db, SqliteDatabase)
    await db.execute("CREATE TABLE t (x INTEGER NOT NULL)")
    return db


async def values(db: SqliteDatabase) -> list[int]:
    return [r["x"] for r in await db.fetch("SELECT x FROM t ORDER BY x")]


async def test_the_event_loop_runs_while_a_batch_works(tmp_path: Path) -> None:
    """The batch waits for something only the event loop does: on the loop's own
    thread it would wait in vain (and report False after its timeout)."""
    db = await open_db(tmp_path)
    try:
        loop_ran = threading.Event()

        def work(conn: sqlite3.Connection) -> bool:
            conn.execute("INSERT INTO t VALUES (1)")
            return loop_ran.wait(5)

        batch = asyncio.create_task(db.run_sync(work, on_thread=True))
        await asyncio.sleep(0)  # the batch's task takes its first step: the work starts
        loop_ran.set()  # a step of the loop's own, taken while the batch works
        assert await batch is True
        assert await values(db) == [1]
    finally:
        await db.close()


@pytest.mark.parametrize("on_thread", [False, True])
async def test_a_batch_that_raises_leaves_nothing_and_the_connection_usable(
        tmp_path: Path, on_thread: bool) -> None:
    db = await open_db(tmp_path)
    try:
        def work(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO t VALUES (1)")
            conn.execute("INSERT INTO t VALUES (NULL)")  # NOT NULL: the batch fails

        with pytest.raises(sqlite3.IntegrityError):
            await db.run_sync(work, on_thread=on_thread)
        assert await values(db) == []
        assert await db.run_sync(lambda conn: conn.execute(
            "INSERT INTO t VALUES (2)").rowcount, on_thread=on_thread) == 1
        assert await values(db) == [2]
    finally:
        await db.close()


@pytest.mark.parametrize("on_thread", [False, True])
async def test_a_batch_waits_for_another_connections_write_lock(
        tmp_path: Path, on_thread: bool) -> None:
    """Without ``on_thread`` too: it waits on the thread then, not on the event loop."""
    db = await open_db(tmp_path)
    other = sqlite3.connect(tmp_path / "batches.sqlite", isolation_level=None,
                            check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO t VALUES (1)")
        batch = asyncio.create_task(db.run_sync(
            lambda conn: conn.execute("SELECT count(*) FROM t").fetchone()[0],
            on_thread=on_thread))
        # The other writer holds its lock for a while (not a wait for a result).
        await asyncio.sleep(0.2)
        assert not batch.done()
        other.execute("COMMIT")
        assert await batch == 1  # run after the other commit, and saw it
    finally:
        other.close()
        await db.close()


async def test_a_cancelled_batch_runs_to_its_end_before_the_cancellation_goes_on(
        tmp_path: Path) -> None:
    db = await open_db(tmp_path)
    try:
        started, release = threading.Event(), threading.Event()

        def work(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT INTO t VALUES (1)")
            started.set()
            assert release.wait(10)
            return 7

        task = asyncio.create_task(db.run_sync(work, on_thread=True))
        assert await asyncio.to_thread(started.wait, 10)
        task.cancel()
        # Queued behind the batch: the connection is the batch's until it has committed.
        reading = asyncio.create_task(values(db))
        await asyncio.sleep(0.05)
        assert not task.done() and not reading.done()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await reading == [1]  # committed, and read after the commit
    finally:
        await db.close()


async def test_a_timeout_around_a_batch_is_a_timeout_and_nothing_more(
        tmp_path: Path) -> None:
    """The cancellation a timeout makes goes on as it came: the timeout reports itself,
    and no cancellation is left over for the caller's next await."""
    db = await open_db(tmp_path)
    try:
        release = threading.Event()

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO t VALUES (1)")
            assert release.wait(10)

        asyncio.get_running_loop().call_later(0.2, release.set)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await db.run_sync(work, on_thread=True)
        assert release.is_set()  # not before the batch ended
        await asyncio.sleep(0)  # not cancelled here
        assert await values(db) == [1]
    finally:
        await db.close()
