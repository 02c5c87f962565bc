"""Per-key request limits: a token bucket on every authenticated route and a cap on
concurrent E12 test sends. Real app, real HTTP client, real receiver; SQLite only (the
limiter keeps no database state)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
from aiohttp import web

from monitor.api.authlimit import FAILED_AUTH
from monitor.api.ratelimit import LIMITER
from monitor.config import ApiConfig, Config, KeyRateLimit
from tests.webhook_support import api_client, make_config, new_key, receiver, subscribe


def _config(tmp_path: Path, **api: Any) -> Config:
    base = make_config(f"sqlite:///{tmp_path / 'store.db'}")
    return msgspec.structs.replace(base, api=ApiConfig(**api))


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_burst_over_the_limit_is_429_and_steady_rate_under_it_never_is(
        tmp_path: Path) -> None:
    config = _config(tmp_path, rate_limit_per_second=10, rate_limit_burst=10)
    async with api_client(config) as (client, db):
        clock = FakeClock()
        client.app[LIMITER].clock = clock
        a, _ = await new_key(db, "a")
        b, _ = await new_key(db, "b")

        async def get(key: str) -> Any:
            return await client.get("/webhooks/subscriptions", headers={"x-api-key": key})

        # Exactly at the limit for 10 simulated seconds: no rejection.
        statuses = []
        for _ in range(100):
            clock.now += 0.1
            statuses.append((await get(a)).status)
        assert statuses == [200] * 100
        # A burst at one instant: the bucket's 10, then 429 with the usual error body.
        clock.now += 10
        burst = [await get(a) for _ in range(11)]
        assert [r.status for r in burst] == [200] * 10 + [429]
        ok, rejected = burst[0], burst[-1]
        assert ok.headers["RateLimit-Limit"] == "10"
        assert ok.headers["RateLimit-Remaining"] == "9"
        assert rejected.headers["Retry-After"] == "1"
        assert rejected.headers["RateLimit-Remaining"] == "0"
        assert int(rejected.headers["RateLimit-Reset"]) >= 1
        body = await rejected.json()
        assert body["error"] == "rate limit exceeded for this API key"
        assert body["retry_after_seconds"] == 1
        # Per key: b has its own full bucket.
        assert [(await get(b)).status for _ in range(10)] == [200] * 10
        # Public routes are never limited, and the bucket refills.
        assert (await client.get("/healthz")).status == 200
        clock.now += 0.1
        assert (await get(a)).status == 200


async def test_limits_are_configurable_per_key(tmp_path: Path) -> None:
    overrides = {"bulk": KeyRateLimit(per_second=0), "tight": KeyRateLimit(burst=2)}
    config = _config(tmp_path, rate_limit_per_second=1, rate_limit_burst=5,
                     key_rate_limits=overrides)
    async with api_client(config) as (client, db):
        client.app[LIMITER].clock = FakeClock()
        bulk, _ = await new_key(db, "bulk")
        tight, _ = await new_key(db, "tight")
        plain, _ = await new_key(db, "plain")

        async def count_ok(key: str, n: int) -> int:
            statuses = [(await client.get("/webhooks/subscriptions",
                                          headers={"x-api-key": key})).status for _ in range(n)]
            assert set(statuses) <= {200, 429}
            return statuses.count(200)

        assert await count_ok(bulk, 50) == 50
        assert await count_ok(tight, 10) == 2
        assert await count_ok(plain, 10) == 5


async def test_concurrent_test_sends_are_capped_per_key(tmp_path: Path) -> None:
    config = _config(tmp_path, max_concurrent_test_sends=2)
    release = asyncio.Event()
    async with api_client(config) as (client, db), receiver() as rec:
        async def hang(_request: web.Request, _body: bytes) -> None:
            await release.wait()  # a receiver that answers only when told

        rec.on_request = hang
        a, _ = await new_key(db, "a")
        b, _ = await new_key(db, "b")
        sub_a = await subscribe(client, a, rec.url)
        sub_b = await subscribe(client, b, rec.url)

        def test_send(key: str, sub: dict[str, Any]) -> Any:
            return client.post(f"/webhooks/subscriptions/{sub['id']}/test",
                               headers={"x-api-key": key})

        first = [asyncio.create_task(test_send(a, sub_a)) for _ in range(2)]
        await rec.wait_requests(2)  # both are waiting on the receiver now
        third = await test_send(a, sub_a)
        assert third.status == 429
        body = await third.json()
        assert body["error"] == "too many test sends in flight for this API key"
        assert body["max_concurrent_test_sends"] == 2 and third.headers["Retry-After"]
        other = asyncio.create_task(test_send(b, sub_b))  # another key is not affected
        await rec.wait_requests(3)
        release.set()
        assert [(await t).status for t in [*first, other]] == [200, 200, 200]
        again = await test_send(a, sub_a)  # the slots are free again
        assert again.status == 200 and (await again.json())["delivered"] is True


async def test_failed_authentication_is_limited_per_client_address(tmp_path: Path) -> None:
    """Keys could be guessed at line rate: a 401 never reached the per-key limiter. Now
    ``failed_auth_burst`` failures, then 429 with Retry-After for every keyed request from
    the address (before the lookup, so a right guess is refused too), never charged."""
    config = _config(tmp_path, failed_auth_per_second=2, failed_auth_burst=5)
    async with api_client(config) as (client, db):
        clock = FakeClock()
        client.app[FAILED_AUTH].clock = clock
        good, good_id = await new_key(db, "good")

        async def get(key: str | None) -> Any:
            headers = {"x-api-key": key} if key is not None else {}
            return await client.get("/webhooks/subscriptions", headers=headers)

        async def charged() -> int:
            return int(await db.fetchval(
                "SELECT COALESCE(SUM(units), 0) FROM cu_ledger WHERE api_key_id = $1",
                good_id) or 0)

        # Successes cost nothing here: far more than the burst with the right key.
        assert [(await get(good)).status for _ in range(20)] == [200] * 20
        units = await charged()
        # Wrong and missing keys alike: the burst of 401s, then 429.
        guesses = [await get(f"dpm_guess{i:040d}") for i in range(4)] + [await get(None)]
        assert [r.status for r in guesses] == [401] * 5
        refused = await get(good)
        assert refused.status == 429
        assert refused.headers["Retry-After"] == "1"
        body = await refused.json()
        assert body["error"] == "too many failed authentications from this address"
        assert body["retry_after_seconds"] == 1
        assert await charged() == units  # the 429 reached no handler
        assert (await client.get("/healthz")).status == 200  # public routes: never limited
        # Half a second refills one token (2/s): one more try, which a wrong key spends.
        clock.now += 0.5
        assert (await get("dpm_" + "x" * 40)).status == 401
        assert (await get(good)).status == 429
        clock.now += 0.5
        assert (await get(good)).status == 200


async def test_failed_authentication_limit_can_be_turned_off(tmp_path: Path) -> None:
    config = _config(tmp_path, failed_auth_per_second=0)
    async with api_client(config) as (client, _db):
        statuses = {(await client.get("/webhooks/subscriptions",
                                      headers={"x-api-key": "dpm_nope"})).status
                    for _ in range(30)}
        assert statuses == {401}


def test_openapi_documents_429_on_every_authenticated_operation() -> None:
    from monitor.api.openapi import build_document

    doc = build_document()
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            if not isinstance(op, dict) or "responses" not in op:
                continue  # path-level parameters
            secured = op.get("security", doc["security"]) != []
            assert ("429" in op["responses"]) == secured, (method, path)
    headers = doc["components"]["responses"]["TooManyRequests"]["headers"]
    assert {"Retry-After", "RateLimit-Limit", "RateLimit-Remaining"} <= set(headers)
