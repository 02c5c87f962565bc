"""A token bucket per client IP on failed authentication (401s), so keys cannot be guessed
at line rate.

Why its own middleware, outside authentication: the per-key limiter
(``monitor/api/ratelimit.py``) only sees requests that already carry a valid key, so a
client trying keys was never limited. This one sits between the error middleware and
``auth_middleware`` and does not touch the key lookup:

* every 401 the inner middlewares answer takes one token from the client's bucket
  (``api.failed_auth_burst`` tokens, refilled at ``api.failed_auth_per_second``);
* while that bucket is empty every request from the address that needs a key is answered
  429 with ``Retry-After`` *before* the key is looked up (a correct guess is refused too:
  otherwise the limit would not slow guessing) — the handler never runs, nothing is
  charged. Public routes (probes, metrics, documents) are never limited.

The client is the TCP peer (``request.remote``): behind a reverse proxy all clients share
its address, so the proxy should limit failed auth itself (docs/rate-limits.md). Successful
requests cost nothing here; a client with a valid key is refused only after a burst of
failures from its own address. Memory: full buckets are dropped once more than
:data:`MAX_TRACKED` addresses are held.
"""

from __future__ import annotations

import math
import time

from aiohttp import web

from ..config import ApiConfig
from .auth import PUBLIC_PATHS
from .context import Handler
from .errors import ApiError
from .ratelimit import Bucket, Clock

#: Addresses held before full (idle) buckets are dropped.
MAX_TRACKED = 10_000


class FailedAuthLimiter:
    def __init__(self, config: ApiConfig, clock: Clock = time.monotonic) -> None:
        self.per_second = config.failed_auth_per_second
        self.burst = config.failed_auth_burst
        self.clock = clock
        self._buckets: dict[str, Bucket] = {}

    @property
    def enabled(self) -> bool:
        return self.per_second > 0 and self.burst > 0

    def wait(self, client: str) -> float:
        """Seconds until ``client`` may try again; 0.0 when its bucket has a token."""
        bucket = self._buckets.get(client)
        if bucket is None:
            return 0.0
        now = self.clock()
        tokens = min(bucket.capacity, bucket.tokens + (now - bucket.updated) * self.per_second)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.per_second

    def charge(self, client: str) -> None:
        """One failed authentication from ``client``."""
        now = self.clock()
        bucket = self._buckets.get(client)
        if bucket is None:
            if len(self._buckets) >= MAX_TRACKED:
                self._prune(now)
            bucket = self._buckets[client] = Bucket(self.burst, self.per_second,
                                                    float(self.burst), now)
        bucket.take(now)

    def _prune(self, now: float) -> None:
        """Forget addresses whose bucket has refilled (they are as if never seen)."""
        full = [c for c, b in self._buckets.items()
                if b.tokens + (now - b.updated) * b.per_second >= b.capacity]
        for client in full:
            del self._buckets[client]


FAILED_AUTH = web.AppKey("failed_auth_limiter", FailedAuthLimiter)


@web.middleware
async def failed_auth_middleware(request: web.Request,
                                 handler: Handler) -> web.StreamResponse:
    limiter = request.app[FAILED_AUTH]
    if request.path in PUBLIC_PATHS or not limiter.enabled:
        return await handler(request)
    client = request.remote or "unknown"
    wait = limiter.wait(client)
    if wait > 0:
        seconds = max(1, math.ceil(wait))
        raise ApiError(429, "too many failed authentications from this address",
                       headers={"Retry-After": str(seconds)}, retry_after_seconds=seconds)
    try:
        return await handler(request)
    except ApiError as exc:
        if exc.status == 401:
            limiter.charge(client)
        raise


def install(app: web.Application, config: ApiConfig) -> None:
    """Add the limiter; ``failed_auth_middleware`` must be placed outside (before)
    ``auth_middleware`` in the app's middleware list."""
    app[FAILED_AUTH] = FailedAuthLimiter(config)
