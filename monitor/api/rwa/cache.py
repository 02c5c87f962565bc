"""Encoded ``GET /rwa`` and ``GET /rwa/{address}`` bodies, reused while nothing changed.

Both responses are a pure function of the request's path and query and of the ratings
store (staleness comes from the snapshots, not the wall clock), and the store writer
increments ``ratings_version`` in every write transaction. So a body built at version
``v`` is served again, byte for byte, for as long as the version still reads ``v``:
a request then costs one primary-key lookup instead of the list's three aggregate and
page queries (or the detail's four) and the JSON encoding.

The version is read once per request, but concurrent requests share one read in flight,
so a response can lag a write by at most that one lookup's round trip. The version is
read *before* a body is built, so a write landing meanwhile only makes the entry look
older than it is (rebuilt on the next request), never newer. Errors are not cached.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from ...storage import Database
from ...storage.ratings import read_version

#: Distinct (path, query) bodies kept; the least recently used go first.
MAX_ENTRIES = 4096


class ReadCache:
    def __init__(self, db: Database, max_entries: int = MAX_ENTRIES) -> None:
        self._db = db
        self._max = max_entries
        self._entries: OrderedDict[str, tuple[int, bytes]] = OrderedDict()
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
        hit = self._entries.get(key)
        if hit is not None and hit[0] == version:
            self._entries.move_to_end(key)
            return hit[1]
        body = await build()
        self._entries[key] = (version, body)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return body
