"""Encoded read-API bodies, reused while the store they were read from is unchanged.

The read routes' responses (``GET /rwa``, ``/rwa/{address}``, ``/vaults``,
``/vaults/{address}``) are a function of the request's path and query and of the store,
and for ``/rwa`` of the wall clock through one field only: ``stale`` turns true once
nothing has refreshed a rating for ``stale_after_seconds``. The store writer increments a
version counter in every write transaction (``ratings_version``, ``vaults_version``), so a
body built at version ``v`` is served again, byte for byte, while the version still reads
``v`` and the body is younger than ``max_age`` seconds: a request then costs a dictionary
lookup instead of the route's aggregate and page queries and the JSON encoding. A version
is anything that only grows in the order of the writes (a counter, or a tuple of counters
for a body read from two stores). A body
between ``max_age`` and twice that old is still served while one rebuild runs in the
background (so no request waits for the once-a-second rebuild); older, the request waits
for it. A quiet store's ratings thus turn ``stale`` at most ``max_age`` plus one rebuild
late, and never more than ``2 * max_age`` late.

Concurrent requests for the same key at the same version share one build: when an entry
has to be rebuilt under load, one request runs the queries and the others wait for that
body instead of queueing the same queries behind it on the database.

The version is not read on every request: a read is reused for ``check_interval``
seconds (``api.ratings_check_seconds``) after it *started*, and concurrent requests share
one read in flight; within the interval a hot request costs no database round trip at
all. Once a read returns a new version, the bodies built before it are still served for
at most another ``check_interval`` while each is rebuilt once in the background (a
request waiting for the rebuild after every store write made the p99 under writes ten
times the p99 without). Hence the documented bound on freshness: a write shows in every
response to a request that starts ``2 * check_interval`` after it committed (plus the
read's own round trip when a request joins one already in flight). The version is read
*before* a body is built, so a write landing meanwhile only makes the entry look older
than it is (rebuilt once the newer version is read), never newer. Errors are not cached.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from aiohttp import web

#: A store version: a counter, or one per store a body is read from (compared as tuples).
V = TypeVar("V", int, tuple[int, int])

#: Distinct (path, query) bodies kept; the least recently used go first.
MAX_ENTRIES = 4096
#: Seconds a body is served without rebuilding while the store does not change.
MAX_AGE = 1.0
#: Seconds a version read is reused (the default of ``api.ratings_check_seconds``).
CHECK_INTERVAL = 0.05


class ReadCache(Generic[V]):
    """Bodies by key (the request's path and query) at the store version they were built
    at; ``read_version`` reads the store's current version (one indexed lookup)."""

    def __init__(self, read_version: Callable[[], Awaitable[V]],
                 max_entries: int = MAX_ENTRIES,
                 max_age: float = MAX_AGE, check_interval: float = CHECK_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._read_version: Callable[[], Awaitable[V]] = read_version
        self._max = max_entries
        self._max_age = max_age
        self._check_interval = check_interval
        self._clock = clock
        #: The last version read, the clock reading when that read started, and when the
        #: first read that returned this version started (when the change was noticed).
        self._known: tuple[V, float, float] | None = None
        self._entries: OrderedDict[str, tuple[V, float, bytes]] = OrderedDict()
        self._reading: asyncio.Future[V] | None = None
        #: key -> (version, its build in flight), shared by concurrent requests.
        self._building: dict[str, tuple[V, asyncio.Future[bytes]]] = {}

    async def version(self) -> V:
        """The store's version as of at most ``check_interval`` ago; callers arriving while
        a read is in flight share it."""
        known = self._known
        if known is not None and self._clock() - known[1] < self._check_interval:
            return known[0]
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._read(self._clock()))
            self._reading.add_done_callback(self._done_reading)
        return await asyncio.shield(self._reading)

    async def _read(self, started: float) -> V:
        version = await self._read_version()
        known = self._known
        noticed = known[2] if known is not None and known[0] == version else started
        self._known = (version, started, noticed)
        return version

    def _done_reading(self, future: asyncio.Future[V]) -> None:
        if self._reading is future:
            self._reading = None
        if not future.cancelled():
            future.exception()  # retrieved here: every waiter gets it raised as well

    async def body(self, key: str, build: Callable[[], Awaitable[bytes]]) -> bytes:
        """The cached body for ``key`` at the current version, else ``build()``'s."""
        version = await self.version()
        noticed = self._known[2] if self._known is not None else -math.inf
        now = self._clock()
        hit = self._entries.get(key)
        if hit is not None and now - hit[1] < 2 * self._max_age:
            current = hit[0] == version
            if current and now - hit[1] < self._max_age:
                self._entries.move_to_end(key)
                return hit[2]
            if current or now - noticed < self._check_interval:
                # Aged, or built before a write noticed less than check_interval ago:
                # served once more while one rebuild runs, so no request waits for it.
                self._entries.move_to_end(key)
                self._building_at(key, version, now, build)
                return hit[2]
        return await asyncio.shield(self._building_at(key, version, now, build))

    def _building_at(self, key: str, version: V, now: float,
                     build: Callable[[], Awaitable[bytes]]) -> asyncio.Future[bytes]:
        """The build of ``key`` at ``version`` in flight, started now if there is none."""
        pending = self._building.get(key)
        if pending is None or pending[0] != version:
            future = asyncio.ensure_future(self._build(key, version, now, build))
            pending = self._building[key] = (version, future)
            future.add_done_callback(lambda done: self._done_building(key, done))
        return pending[1]

    async def _build(self, key: str, version: V, built_at: float,
                     build: Callable[[], Awaitable[bytes]]) -> bytes:
        body = await build()
        current = self._entries.get(key)
        if current is None or current[0] <= version:  # never replace a newer version's
            self._entries[key] = (version, built_at, body)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return body

    def _done_building(self, key: str, future: asyncio.Future[bytes]) -> None:
        pending = self._building.get(key)
        if pending is not None and pending[1] is future:
            del self._building[key]
        if not future.cancelled():
            future.exception()  # retrieved here: every waiter gets it raised as well


async def cached_response(request: web.Request, cache: ReadCache[Any],
                          build: Callable[[web.Request], Awaitable[bytes]]) -> web.Response:
    """A read route's 200: ``cache``'s body for the request's path and query, built by
    ``build(request)`` when it has none. A bad query never has an entry: its build raises,
    and errors are not cached."""
    body = await cache.body(str(request.rel_url), lambda: build(request))
    return web.Response(body=body, content_type="application/json")
