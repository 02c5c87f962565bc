"""The delivery worker's WAL checkpoints run on a thread, and nothing committed is lost.

The truth used here is the database *file* on its own: a copy of it without its
``-wal`` log holds exactly what was checkpointed; a copy with its log holds every
committed transaction (what a restart after a crash would find)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from monitor.storage import Database, connect
from monitor.webhooks.walcheckpoint import WalCheckpoints


def _rows(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM t").fetchone()[0])
    finally:
        conn.close()


def _log_frames(path: Path) -> int:
    """Frames in the log (a PASSIVE checkpoint's report; it only copies)."""
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
    finally:
        conn.close()


def _copy(db: Path, into: Path, with_log: bool) -> Path:
    into.mkdir()
    shutil.copyfile(db, into / db.name)
    if with_log and Path(f"{db}-wal").exists():
        shutil.copyfile(f"{db}-wal", into / f"{db.name}-wal")
    return into / db.name


async def _insert(db: Database, rows: range) -> None:
    for i in rows:
        await db.execute("INSERT INTO t (n, pad) VALUES ($1, $2)", i, "x" * 500)


async def test_the_worker_connection_leaves_checkpoints_to_the_thread(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    db = await connect(f"sqlite:///{path}")
    try:
        await db.execute("CREATE TABLE t (n INTEGER, pad TEXT)")
        await db.fetch("PRAGMA wal_checkpoint(TRUNCATE)")  # the empty table in the file
        checkpoints = await WalCheckpoints.start(db)
        assert checkpoints is not None
        assert await db.fetchval("PRAGMA wal_autocheckpoint") == 0
        # Past SQLite's own 1,000-page threshold (~4 MB): with automatic checkpoints
        # these commits would have copied themselves into the file.
        await _insert(db, range(3000))
        assert _rows(_copy(path, tmp_path / "file_only", with_log=False)) == 0
        # Every commit is durable all the same: the file with its log has them all.
        assert _rows(_copy(path, tmp_path / "with_log", with_log=True)) == 3000

        started = checkpoints.after_cycle()
        assert started is not None
        assert checkpoints.after_cycle() is None  # one at a time
        await started
        assert _rows(_copy(path, tmp_path / "after", with_log=False)) == 3000
        # The log was copied whole, so the next commit starts it over: it holds only
        # that commit's pages, not the 3,000 rows' before them.
        await _insert(db, range(3000, 3001))
        assert _log_frames(path) < 100

        await _insert(db, range(3001, 3010))
        await checkpoints.stop()
        assert _rows(_copy(path, tmp_path / "stopped", with_log=False)) == 3010
        assert await db.fetchval("PRAGMA wal_autocheckpoint") == 1000
    finally:
        await db.close()


async def test_nothing_to_take_over_without_a_wal_file(tmp_path: Path, pg_url: str) -> None:
    memory = await connect("sqlite://:memory:")
    pg = await connect(pg_url)
    try:
        assert await WalCheckpoints.start(memory) is None
        assert await WalCheckpoints.start(pg) is None
    finally:
        await memory.close()
        await pg.close()
