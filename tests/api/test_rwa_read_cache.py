"""GET /rwa and /rwa/{address} serve cached bodies only while the store is unchanged:
a write by another connection (the store writer's) shows in the very next response, and
a cached body is byte-identical to a freshly built one."""

from __future__ import annotations

from pathlib import Path

import aiohttp
from readapi_support import T0, api_headers, population, serve, snapshot

from monitor.api.app import create_app
from monitor.config import Config, RegistryConfig
from monitor.registry import parse_registry
from monitor.storage import connect
from monitor.storage.ratings import RatingsStore

PATHS = ["/rwa", "/rwa?sort=symbol&order=asc&pageSize=7&page=2", "/rwa?tier=critical&limit=5",
         "/rwa/0x0000000000000000000000000000000000000001?hours=48"]


async def test_writes_by_another_connection_show_at_once(storage_url: str,
                                                         tmp_path: Path) -> None:
    snaps, registry_text = population(40)
    reg_path = tmp_path / "tokens.toml"
    reg_path.write_text(registry_text)
    api_db, writer_db = await connect(storage_url), await connect(storage_url)
    try:
        await RatingsStore(api_db).migrate()
        writer = RatingsStore(writer_db)
        await writer.write_batch(snaps, [])
        app = create_app(Config(registry=RegistryConfig(path=str(reg_path))), api_db)
        async with serve(app) as base, aiohttp.ClientSession(
                headers=await api_headers(api_db)) as session:
            async def bodies() -> list[bytes]:
                out = []
                for path in PATHS:
                    async with session.get(base + path) as resp:
                        assert resp.status == 200, await resp.text()
                        out.append(await resp.read())
                return out

            first = await bodies()
            assert await bodies() == first  # served again, byte for byte

            # The writer moves token 1 to critical: list and detail both show it next.
            first_snap = next(s for s in snaps
                              if s.token_address == "0x0000000000000000000000000000000000000001")
            moved = snapshot(first_snap.chain, first_snap.token_address, T0 + 2 * 86400,
                             97.5, "critical", 0.5)
            await writer.write_batch([moved], [])
            after = await bodies()
            assert after[0] != first[0] and after[3] != first[3]
            async with session.get(base + "/rwa/" + moved.token_address) as resp:
                detail = await resp.json()
            assert (detail["tier"], detail["rating"]) == ("critical", 97.5)
            async with session.get(base + "/rwa?tier=critical&limit=100") as resp:
                listed = await resp.json()
            assert moved.token_address in {i["address"] for i in listed["items"]}

            # A registry change (names shown in the list) is a write as well.
            await writer.sync_registry(parse_registry(registry_text)[1:])
            assert (await bodies())[0] != after[0]

            # What the cache serves is what a fresh app on the same data builds.
            fresh = create_app(Config(registry=RegistryConfig(path=str(reg_path))), api_db)
            async with serve(fresh) as base2:  # (it loads the whole registry file back)
                cached = await bodies()  # built once here, then served from the cache:
                assert await bodies() == cached
                for path, body in zip(PATHS, cached, strict=True):
                    async with session.get(base2 + path) as resp:
                        assert await resp.read() == body
    finally:
        await api_db.close()
        await writer_db.close()


async def test_a_cached_body_is_rebuilt_once_older_than_its_max_age(tmp_path: Path) -> None:
    """A quiet store does not freeze the wall-clock ``stale`` flag: bodies expire."""
    from monitor.api.rwa.cache import ReadCache

    db = await connect(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        await RatingsStore(db).migrate()
        wall = [100.0]
        cache = ReadCache(db, max_age=1.0, clock=lambda: wall[0])
        builds: list[float] = []

        async def build() -> bytes:
            builds.append(wall[0])
            return f"built at {wall[0]}".encode()

        assert await cache.body("/rwa", build) == b"built at 100.0"
        wall[0] = 100.9
        assert await cache.body("/rwa", build) == b"built at 100.0"  # young: served again
        wall[0] = 101.0
        assert await cache.body("/rwa", build) == b"built at 101.0"  # a second old: rebuilt
        assert builds == [100.0, 101.0]
    finally:
        await db.close()
