"""The delivery worker's SQLite WAL checkpoints, on a thread of their own.

In WAL mode a connection checkpoints by itself when one of its commits leaves the log
longer than 1,000 pages, inside that COMMIT: the pages are copied into the database
file and both files are synced (``synchronous=NORMAL`` syncs at checkpoints, not at
commits). Inside the worker's cycle (:meth:`~monitor.storage.sqlite.SqliteDatabase.run_sync`)
that stood every few dozen cycles still for the I/O: in a drain of 20,000 deliveries
~33 COMMITs took over 2 ms each, and the COMMITs' wall time per delivery fell by a third
to a half with the checkpoints moved here (docs/performance.md, "Delivery, fourteenth
pass"; the cycle ran on the event loop's thread, so no send moved either; a busy
worker's cycles run on a thread of their own since, but a cycle held up is still a
claim held up).

So the worker's connection does not checkpoint (``wal_autocheckpoint=0``) while the
dispatcher runs, and this runs ``PRAGMA wal_checkpoint(PASSIVE)`` on a connection of
its own in a worker thread instead: after a cycle, when none is running and
:data:`INTERVAL` has passed since the last one began, and once more when the
dispatcher stops. A PASSIVE checkpoint takes no lock a writer waits for, and SQLite
releases the GIL while it copies and syncs; a log over :data:`RESTART_FRAMES` is
copied with writers held off, so that it starts over (see ``_checkpoint``).

Durability does not change: a transaction is in the log (the database's own file,
replayed on open) when its COMMIT returns, checkpointed or not. Other processes'
connections (the API, the store writer) keep their own automatic checkpoints.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time

from ..logs import get_logger
from ..storage import Database

log = get_logger(__name__)

#: Seconds between the starts of two checkpoints while the worker is busy (SQLite's own
#: 1,000-page threshold is ~4 MB of log; a busy worker writes far less than that in 0.1 s).
INTERVAL = 0.1
#: Log frames (pages) past which a checkpoint also restarts the log: SQLite's own
#: checkpoint threshold, so the log stays about as long as it was with its checkpoints.
RESTART_FRAMES = 1000
#: How long the RESTART waits for a writer to finish (then it tries again next time).
BUSY_SECONDS = 1.0
#: What the worker's connection is set back to on stop (SQLite's default).
DEFAULT_AUTOCHECKPOINT = 1000


class WalCheckpoints:
    def __init__(self, db: Database, path: str) -> None:
        self._db = db
        self._path = path
        self._conn: sqlite3.Connection | None = None
        self._running: asyncio.Future[None] | None = None
        self._last = 0.0

    @classmethod
    async def start(cls, db: Database) -> WalCheckpoints | None:
        """Take over ``db``'s checkpoints; None where there is nothing to take over (not
        SQLite, an in-memory database, or a journal other than WAL)."""
        if db.dialect != "sqlite":
            return None
        try:
            rows = await db.fetch("PRAGMA database_list")
            path = next((str(r["file"]) for r in rows if r["name"] == "main"), "")
            if not path or str(await db.fetchval("PRAGMA journal_mode")).lower() != "wal":
                return None
            await db.execute("PRAGMA wal_autocheckpoint=0")
        except sqlite3.Error as exc:
            # The connection keeps checkpointing by itself, as before.
            log.warning("webhook.wal_checkpoints_not_taken_over", error=str(exc))
            return None
        return cls(db, path)

    def after_cycle(self) -> asyncio.Future[None] | None:
        """Start a checkpoint in a thread unless one runs or one began < INTERVAL ago;
        never waits for it. Returns the checkpoint started, if one was."""
        now = time.monotonic()
        if self._running is not None and not self._running.done():
            return None
        if now - self._last < INTERVAL:
            return None
        self._last = now
        self._running = asyncio.ensure_future(asyncio.to_thread(self._checkpoint))
        return self._running

    def _checkpoint(self) -> None:
        try:
            if self._conn is None:
                self._conn = sqlite3.connect(self._path, check_same_thread=False,
                                             isolation_level=None, timeout=BUSY_SECONDS)
            _, frames, _ = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if frames >= RESTART_FRAMES:
                # Writes went on during the PASSIVE checkpoints, so the log was never
                # wholly copied when a writer began, which is when SQLite starts it
                # over: it grew (25 MB in one drain of 20,000). RESTART makes writers
                # wait while it copies the rest (the worker's cycle waits on a thread,
                # see run_sync, not on the event loop), and the next commit starts the
                # log from its beginning.
                self._conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
        except sqlite3.Error as exc:
            # The log stays the database's; the next checkpoint copies what this did not.
            log.warning("webhook.wal_checkpoint_failed", error=str(exc))

    async def stop(self) -> None:
        """Wait for a running checkpoint, run a last one, and give the worker's
        connection its automatic checkpoints back."""
        if self._running is not None:
            await asyncio.gather(self._running, return_exceptions=True)
        try:
            await asyncio.to_thread(self._checkpoint)
        finally:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            try:
                await self._db.execute(f"PRAGMA wal_autocheckpoint={DEFAULT_AUTOCHECKPOINT}")
            except (sqlite3.Error, ValueError) as exc:  # ValueError: aiosqlite closed
                log.warning("webhook.wal_autocheckpoint_not_restored", error=str(exc))
