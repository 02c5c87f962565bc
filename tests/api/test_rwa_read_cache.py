"""GET /rwa and /rwa/{address} serve cached bodies only while the store is unchanged:
a write by another connection (the store writer's) shows in every response to a request
that starts twice ``api.ratings_check_seconds`` after it (the documented bound, proved on
an injected clock), and a cached body is byte-identical to a freshly built one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from monitor.api.app import create_app
from monitor.api.readcache import ReadCache
from monitor.config import ApiConfig, Config
from monitor.registry import parse_registry
from monitor.storage import connect
from monitor.storage.ratings import RatingsStore, read_version
from tests.readapi_support import (
    T0,
    past_the_bound,
    population,
    read_bodies,
    registry_file,
    serve,
    served_on_a_clock,
    snapshot,
)

PATHS = ["/rwa", "/rwa?sort=symbol&order=asc&pageSize=7&page=2", "/rwa?tier=critical&limit=5",
         "/rwa/0x0000000000000000000000000000000000000001?hours=48"]


async def test_writes_by_another_connection_show_within_the_check_interval(
        storage_url: str, tmp_path: Path) -> None:
    snaps, registry_text = population(40)
    registry = registry_file(tmp_path, registry_text)
    api_db, writer_db = await connect(storage_url), await connect(storage_url)
    try:
        await RatingsStore(api_db).migrate()
        writer = RatingsStore(writer_db)
        await writer.write_batch(snaps, [])
        # The version is trusted for 0.1 s of the app's monotonic clock, injected here, and
        # bodies built before a write are served for at most 0.1 s after it was noticed.
        config = Config(api=ApiConfig(ratings_check_seconds=0.1),
                        registry=registry)
        app = create_app(config, api_db)
        async with served_on_a_clock(app, api_db) as (base, session, ticks):
            async def bodies() -> list[bytes]:
                return await read_bodies(session, base, PATHS)

            first = await bodies()
            assert await bodies() == first  # served again, byte for byte

            # The writer moves token 1 to critical: list and detail both show it next.
            first_snap = next(s for s in snaps
                              if s.token_address == "0x0000000000000000000000000000000000000001")
            moved = snapshot(first_snap.chain, first_snap.token_address, T0 + 2 * 86400,
                             97.5, "critical", 0.5)
            await writer.write_batch([moved], [])
            after = await past_the_bound(bodies, ticks, first)
            assert after[0] != first[0] and after[3] != first[3]
            async with session.get(base + "/rwa/" + moved.token_address) as resp:
                detail = await resp.json()
            assert (detail["tier"], detail["rating"]) == ("critical", 97.5)
            async with session.get(base + "/rwa?tier=critical&limit=100") as resp:
                listed = await resp.json()
            assert moved.token_address in {i["address"] for i in listed["items"]}

            # A registry change (names shown in the list) is a write as well.
            await writer.sync_registry(parse_registry(registry_text)[1:])
            ticks[0] += 0.1
            await bodies()
            ticks[0] += 0.1
            assert (await bodies())[0] != after[0]

            # What the cache serves is what a fresh app on the same data builds.
            fresh = create_app(Config(registry=registry), api_db)
            async with serve(fresh) as base2:  # (it loads the whole registry file back)
                ticks[0] += 0.1  # (a write, shown by the first app once the bound passed)
                await bodies()
                ticks[0] += 0.1
                cached = await bodies()  # built once here, then served from the cache:
                assert await bodies() == cached
                for path, body in zip(PATHS, cached, strict=True):
                    async with session.get(base2 + path) as resp:
                        assert await resp.read() == body
    finally:
        await api_db.close()
        await writer_db.close()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RatingsStore]:
    """A migrated ratings store in a SQLite file of its own."""
    db = await connect(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        store = RatingsStore(db)
        await store.migrate()
        yield store
    finally:
        await db.close()


async def test_a_cached_body_is_rebuilt_once_older_than_its_max_age(
        store: RatingsStore) -> None:
    """A quiet store does not freeze the wall-clock ``stale`` flag: bodies expire. Between
    max_age and twice that, the old body is served while one rebuild runs; past twice
    max_age a request waits for the new one."""
    wall = [100.0]
    # (The version is read once: nothing here waits on the database after that.)
    cache = ReadCache(lambda: read_version(store.db), max_age=1.0, check_interval=1e9,
                      clock=lambda: wall[0])
    builds: list[float] = []
    gate = asyncio.Event()

    async def build() -> bytes:
        builds.append(wall[0])
        if len(builds) > 1:
            await gate.wait()  # a rebuild in flight until the test lets it finish
        return f"built at {wall[0]}".encode()

    assert await cache.body("/rwa", build) == b"built at 100.0"
    wall[0] = 100.9
    assert await cache.body("/rwa", build) == b"built at 100.0"  # young: served again
    wall[0] = 101.0
    # A second old: still served, while one rebuild starts (not one per request).
    assert await cache.body("/rwa", build) == b"built at 100.0"
    assert await cache.body("/rwa", build) == b"built at 100.0"
    await asyncio.sleep(0)  # one loop turn: the background rebuild starts
    assert builds == [100.0, 101.0]
    wall[0] = 102.0  # twice max_age: this request waits for the rebuild in flight
    waiting = asyncio.ensure_future(cache.body("/rwa", build))
    await asyncio.sleep(0)
    assert not waiting.done()
    gate.set()
    assert await waiting == b"built at 102.0"  # (the build reads the clock as it ends)
    assert builds == [100.0, 101.0]


async def test_concurrent_misses_share_one_build(store: RatingsStore) -> None:
    """Many requests for a key nobody has built yet run its queries once, not once each,
    and a version change is read once per check interval, not once per request."""
    ticks = [0.0]
    cache = ReadCache(lambda: read_version(store.db), check_interval=0.1, clock=lambda: ticks[0])
    builds = 0
    gate = asyncio.Event()

    async def build() -> bytes:
        nonlocal builds
        builds += 1
        await gate.wait()
        return b"body %d" % builds

    await cache.version()  # read once, so no request below waits on the database
    waiting = [asyncio.ensure_future(cache.body("/rwa", build)) for _ in range(20)]
    await asyncio.sleep(0)  # one loop turn: each request runs up to the shared build
    assert not any(w.done() for w in waiting)
    gate.set()
    assert set(await asyncio.gather(*waiting)) == {b"body 1"} and builds == 1
    await store.sync_registry([])  # a write: the version moves
    assert await cache.body("/rwa", build) == b"body 1"  # (within the check interval)
    ticks[0] = 0.1  # noticed: the old body once more, while one rebuild starts
    assert await cache.body("/rwa", build) == b"body 1"
    assert await cache.body("/rwa", build) == b"body 1"
    ticks[0] = 0.2  # (the rebuild ran while this request read the version)
    assert await cache.body("/rwa", build) == b"body 2" and builds == 2


async def test_past_the_bound_a_request_waits_for_the_new_body(store: RatingsStore) -> None:
    """Twice the check interval after a write was noticed, no body from before it is
    served, even when its rebuild is still running."""
    ticks = [0.0]
    cache = ReadCache(lambda: read_version(store.db), check_interval=0.1, clock=lambda: ticks[0])
    gate = asyncio.Event()
    builds = 0

    async def build() -> bytes:
        nonlocal builds
        builds += 1
        if builds > 1:
            await gate.wait()  # the rebuild after the write hangs until released
        return b"body %d" % builds

    assert await cache.body("/rwa", build) == b"body 1"
    await store.sync_registry([])
    ticks[0] = 0.1
    assert await cache.body("/rwa", build) == b"body 1"  # noticed; rebuild hangs
    ticks[0] = 0.199
    assert await cache.body("/rwa", build) == b"body 1"
    ticks[0] = 0.2
    await cache.version()  # read here, so the request below does not wait on the database
    waiting = asyncio.ensure_future(cache.body("/rwa", build))
    await asyncio.sleep(0)  # one loop turn: the request runs up to the rebuild, and waits
    assert not waiting.done() and builds == 2
    gate.set()
    assert await waiting == b"body 2" and builds == 2
