"""Encoded ``GET /rwa`` and ``GET /rwa/{address}`` bodies, reused while nothing changed.

Both responses are a function of the request's path and query, of the ratings store,
and of the wall clock through one field only: ``stale`` turns true once nothing has
refreshed a rating for ``stale_after_seconds``. The store writer increments
``ratings_version`` in every write transaction, so a body built at version ``v`` is
served again, byte for byte, while the version still reads ``v`` and the body is younger
than ``max_age`` seconds (the bound on how late a quiet store's ratings turn stale): a
request then costs one primary-key lookup instead of the list's three aggregate and page
queries (or the detail's four) and the JSON encoding.

The version is read once per request, but concurrent requests share one read in flight,
so a response can lag a write by at most that one lookup's round trip. The version is
read *before* a body is built, so a write landing meanwhile only makes the entry look
older than it is (rebuilt on the next request), never newer. Errors are not cached.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from ...storage import Database
from ...storage.ratings import read_version

#: Distinct (path, query) bodies kept; the least recently used go first.
MAX_ENTRIES = 4096
#: Seconds a body is served without rebuilding while the store does not change.
MAX_AGE = 1.0


class ReadCache:
    def __init__(self, db: Database, max_entries: int = MAX_ENTRIES,
                 max_age: float = MAX_AGE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._db = db
        self._max = max_entries
        self._max_age = max_age
        self._clock = clock
        self._entries: OrderedDict[str, tuple[int, float, bytes]] = OrderedDict()
        self._reading: asyncio.Future[int] | None = None

    async def version(self) -> int:
        """The store's version; callers arriving while a read is in flight share it."""
        if self._reading is None:
            self._reading = asyncio.ensure_future(read_version(self._db))
            self._reading.add_done_callback(self._done_reading)
        return await asyncio.shield(self._reading)

    def _done_reading(self, future: asyncio.Future[int]) -> None:
        if self._reading is future:
            self._reading = None
        if not future.cancelled():
            future.exception()  # retrieved here: every waiter gets it raised as well

    async def body(self, key: str, build: Callable[[], Awaitable[bytes]]) -> bytes:
        """The cached body for ``key`` at the current version, else ``build()``'s."""
        version = await self.version()
        built_at = self._clock()
        hit = self._entries.get(key)
        if hit is not None and hit[0] == version and built_at - hit[1] < self._max_age:
            self._entries.move_to_end(key)
            return hit[2]
        body = await build()
        self._entries[key] = (version, built_at, body)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return body
