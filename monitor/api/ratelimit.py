"""Request limits per API key: a token bucket on every authenticated route, and a cap on
concurrent test sends (E12).

Why per key and in memory: the limit protects the service (and the receivers E12 calls)
from one client's loop or script; keys are few, so one small bucket each costs nothing,
and a limit that resets when the process restarts is acceptable for that purpose. With
several API replicas each enforces its own limit (documented in docs/rate-limits.md).

* **Bucket**: ``api.rate_limit_burst`` requests at once, refilled at
  ``api.rate_limit_per_second``; a request that finds it empty is 429 with
  ``Retry-After`` (whole seconds until one token is back) and the error body every other
  error has. Every answer to an authenticated request carries ``RateLimit-Limit``,
  ``RateLimit-Remaining`` and ``RateLimit-Reset`` (IETF draft httpapi-ratelimit-headers)
  plus ``RateLimit-Policy`` (``<burst>;w=<seconds to refill>``).
* **Test sends**: E12 waits for the receiver (up to ``delivery.timeout_seconds``), so a
  key may have at most ``api.max_concurrent_test_sends`` of them in flight; one more is
  429 at once instead of another hanging connection.
* **Per key**: ``[api.key_rate_limits.<name, id or display prefix>]`` overrides
  ``per_second``/``burst``/``max_concurrent_test_sends`` for one key (0 per_second: no
  limit for it).

Rejected requests are not charged compute units (the handler never runs).
"""

from __future__ import annotations

import copy
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ..config import ApiConfig, KeyRateLimit
from ..storage import Database
from .context import API_KEY_ID
from .errors import ApiError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Clock = Callable[[], float]

#: E12, on the v2 path and any versioned mount of it.
TEST_SEND_PATH = re.compile(r"/webhooks/subscriptions/[^/]+/test$")


@dataclass
class Bucket:
    capacity: float
    per_second: float
    tokens: float
    updated: float

    def take(self, now: float) -> float:
        """Take one token; 0.0 on success, else the seconds until one is available."""
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.per_second)
        self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.per_second

    def reset_seconds(self) -> int:
        """Seconds until the bucket is full again."""
        return math.ceil((self.capacity - self.tokens) / self.per_second)


@dataclass(frozen=True)
class Limits:
    per_second: float
    burst: int
    max_concurrent_test_sends: int


class RateLimiter:
    """Buckets and in-flight test sends per key id; limits resolved once per key."""

    def __init__(self, config: ApiConfig, db: Database, clock: Clock = time.monotonic) -> None:
        self.config = config
        self.db = db
        self.clock = clock
        self._buckets: dict[str, Bucket] = {}
        self._limits: dict[str, Limits] = {}
        self._test_sends: dict[str, int] = {}

    async def limits(self, key_id: str) -> Limits:
        found = self._limits.get(key_id)
        if found is None:
            found = self._limits[key_id] = await self._resolve(key_id)
        return found

    async def _resolve(self, key_id: str) -> Limits:
        c = self.config
        override: KeyRateLimit | None = None
        if c.key_rate_limits:
            row = await self.db.fetchrow(
                "SELECT name, prefix FROM api_keys WHERE id = $1", key_id)
            for name in (key_id, *(() if row is None else (row["prefix"], row["name"]))):
                if name in c.key_rate_limits:
                    override = c.key_rate_limits[name]
                    break
        if override is None:
            return Limits(c.rate_limit_per_second, c.rate_limit_burst,
                          c.max_concurrent_test_sends)
        return Limits(
            c.rate_limit_per_second if override.per_second is None else override.per_second,
            c.rate_limit_burst if override.burst is None else override.burst,
            c.max_concurrent_test_sends if override.max_concurrent_test_sends is None
            else override.max_concurrent_test_sends)

    def take(self, key_id: str, limits: Limits) -> tuple[float, dict[str, str]]:
        """(seconds to wait, 0 when allowed; the RateLimit-* headers)."""
        now = self.clock()
        bucket = self._buckets.get(key_id)
        if bucket is None or bucket.capacity != limits.burst:
            bucket = self._buckets[key_id] = Bucket(
                limits.burst, limits.per_second, float(limits.burst), now)
        wait = bucket.take(now)
        window = math.ceil(limits.burst / limits.per_second)
        headers = {
            "RateLimit-Limit": str(limits.burst),
            "RateLimit-Remaining": str(int(bucket.tokens)),
            "RateLimit-Reset": str(max(bucket.reset_seconds(), math.ceil(wait))),
            "RateLimit-Policy": f"{limits.burst};w={window}",
        }
        return wait, headers

    def start_test_send(self, key_id: str, limit: int) -> bool:
        if self._test_sends.get(key_id, 0) >= limit:
            return False
        self._test_sends[key_id] = self._test_sends.get(key_id, 0) + 1
        return True

    def end_test_send(self, key_id: str) -> None:
        left = self._test_sends.get(key_id, 1) - 1
        if left > 0:
            self._test_sends[key_id] = left
        else:
            self._test_sends.pop(key_id, None)


LIMITER = web.AppKey("rate_limiter", RateLimiter)


def _too_many(message: str, wait: float, headers: dict[str, str], **details: Any) -> ApiError:
    seconds = max(1, math.ceil(wait))
    return ApiError(429, message, headers={**headers, "Retry-After": str(seconds)},
                    retry_after_seconds=seconds, **details)


@web.middleware
async def rate_limit_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Inside the auth middleware: only requests with a valid key get here with an id."""
    if API_KEY_ID not in request:
        return await handler(request)  # public route
    limiter = request.app[LIMITER]
    key_id = request[API_KEY_ID]
    limits = await limiter.limits(key_id)
    headers: dict[str, str] = {}
    if limits.per_second > 0 and limits.burst > 0:
        wait, headers = limiter.take(key_id, limits)
        if wait > 0:
            raise _too_many("rate limit exceeded for this API key", wait, headers,
                            limit=limits.burst, per_second=limits.per_second)
    if request.method == "POST" and TEST_SEND_PATH.search(request.path):
        if not limiter.start_test_send(key_id, limits.max_concurrent_test_sends):
            raise _too_many("too many test sends in flight for this API key", 1.0, headers,
                            max_concurrent_test_sends=limits.max_concurrent_test_sends)
        try:
            response = await handler(request)
        finally:
            limiter.end_test_send(key_id)
    else:
        response = await handler(request)
    if headers and not response.prepared:
        response.headers.update(headers)
    return response


def install(app: web.Application, config: ApiConfig, db: Database) -> None:
    """Add the limiter to ``app``; its middleware runs after (inside) authentication."""
    app[LIMITER] = RateLimiter(config, db)
    app.middlewares.append(rate_limit_middleware)


_HEADERS = {name: {"schema": {"type": "integer", "minimum": 0}, "description": text}
            for name, text in (
                ("RateLimit-Limit", "Requests allowed at once (the bucket size)"),
                ("RateLimit-Remaining", "Requests left right now"),
                ("RateLimit-Reset", "Seconds until the bucket is full again"))}


def document(doc: dict[str, Any]) -> dict[str, Any]:
    """Every operation that takes a key may answer 429 (OpenAPI document post-processing).
    Works on a copy: the route modules' path dicts are module constants."""
    doc = copy.deepcopy(doc)
    default_secured = bool(doc.get("security"))
    for operations in doc.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            if operation.get("security", None if default_secured else []) == []:
                continue
            operation["responses"].setdefault(
                "429", {"$ref": "#/components/responses/TooManyRequests"})
    too_many = doc.get("components", {}).get("responses", {}).get("TooManyRequests")
    if too_many is not None:
        too_many.setdefault("headers", {}).update(_HEADERS)
    return doc
