"""Verified API keys, remembered for a few seconds so a request needs no database lookup.

Every authenticated request used to hash its key and look the hash up in ``api_keys``: a
database round trip that, on the read API's hot path, cost more than building the answer
(``GET /rwa`` is served from memory, docs/performance.md). A key found valid is now
remembered for ``api.key_cache_seconds``; within that time the same key is accepted
without a lookup. That time is therefore the bound on revocation latency: a key revoked
(``depeg-monitor keys revoke``, or replaced by a rotation) by any process stops working
for requests that start more than ``key_cache_seconds`` after the revoking transaction
committed. 0 turns the cache off (every request looks its key up, as before).

What is *not* remembered: unknown or revoked keys. A key created a moment ago works on
its first request, and a guessed key costs its lookup every time, as it did before.
Concurrent requests with the same not-yet-verified key share one lookup. Entries are keyed
by the key's SHA-256 (the same hash the table stores), never by the key itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from ..storage import Database
from ..storage.webhooks import WebhookStore
from ..webhooks.apikeys import hash_api_key

#: Distinct verified keys remembered; the longest unverified go first.
MAX_ENTRIES = 10_000


class VerifiedKeys:
    def __init__(self, db: Database, ttl: float, clock: Callable[[], float] = time.monotonic,
                 max_entries: int = MAX_ENTRIES) -> None:
        self._store = WebhookStore(db)
        self._ttl = ttl
        self._clock = clock
        self._max = max_entries
        #: key hash -> (key id, clock reading when the lookup that found it *started*).
        self._verified: dict[str, tuple[str, float]] = {}
        self._looking: dict[str, asyncio.Future[str | None]] = {}

    async def key_id(self, key: str) -> str | None:
        """The id of ``key`` when it exists and is not revoked (as of at most ``ttl`` ago)."""
        digest = hash_api_key(key)
        now = self._clock()
        hit = self._verified.get(digest)
        if hit is not None and now - hit[1] < self._ttl:
            return hit[0]
        pending = self._looking.get(digest)
        if pending is None:
            pending = asyncio.ensure_future(self._look_up(digest, now))
            self._looking[digest] = pending
            pending.add_done_callback(lambda done: self._done(digest, done))
        return await asyncio.shield(pending)

    async def _look_up(self, digest: str, started: float) -> str | None:
        # Stamped with the time the lookup *started*: a revocation committed while it
        # runs may be missed by it, so the entry must count as that old, not younger.
        key_id = await self._store.authenticate_hash(digest)
        self._verified.pop(digest, None)
        if key_id is not None and self._ttl > 0:
            self._verified[digest] = (key_id, started)
            while len(self._verified) > self._max:
                del self._verified[next(iter(self._verified))]
        return key_id

    def _done(self, digest: str, future: asyncio.Future[str | None]) -> None:
        if self._looking.get(digest) is future:
            del self._looking[digest]
        if not future.cancelled():
            future.exception()  # retrieved here: every waiter gets it raised as well
