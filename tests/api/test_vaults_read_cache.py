"""GET /vaults and /vaults/{address} serve cached bodies only while the stores are
unchanged: a vault-store write by another connection (the store writer's) shows in both
within twice ``api.ratings_check_seconds``, a ratings-store write (an underlying's depeg
tier) in the detail's composition within the same bound, and a cached body is
byte-identical to the one a fresh app builds from the same rows. The bound is proved on an
injected clock, so nothing here sleeps."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NamedTuple

import aiohttp

from monitor.api.app import create_app
from monitor.config import ApiConfig, Config
from monitor.storage import Database, connect
from monitor.storage.ratings import RatingsStore
from monitor.storage.vaults import VaultStore, read_version, read_versions
from tests.readapi_support import (
    past_the_bound,
    read_bodies,
    serve,
    served_on_a_clock,
    snapshot,
)
from tests.vaults_support import (
    T0,
    USDC_ETH,
    Population,
    load,
    population,
    rating_record,
    rating_row,
)

N = 40


class VaultApi(NamedTuple):
    """The read API's connection and the vault store's writer on another one."""

    db: Database
    writer: VaultStore


@asynccontextmanager
async def cached_vault_api(storage_url: str, pop: Population
                           ) -> AsyncIterator[tuple[VaultApi, str, aiohttp.ClientSession,
                                                    list[float]]]:
    """The app on one connection (read cache checked every 0.1 s of its injected clock,
    no rate limit) and the vault store's writer on another, as the store writer is,
    loaded with ``pop``; yields the two, the base URL, a client session and the clock."""
    api_db, writer_db = await connect(storage_url), await connect(storage_url)
    try:
        writer = VaultStore(writer_db)
        await writer.migrate()
        await load(writer, pop)
        app = create_app(Config(api=ApiConfig(ratings_check_seconds=0.1,
                                              rate_limit_per_second=0)), api_db)
        async with served_on_a_clock(app, api_db) as (base, session, ticks):
            yield VaultApi(api_db, writer), base, session, ticks
    finally:
        await api_db.close()
        await writer_db.close()


async def test_writes_by_another_connection_show_within_the_check_interval(
        storage_url: str) -> None:
    pop = population(N)
    # A vault on eth holding USDC: its detail shows USDC's depeg tier from the ratings store.
    held = next(r for f, r in zip(pop.facts, pop.records, strict=True)
                if f["chain"] == "eth" and f["underlying_address"] == USDC_ETH)
    paths = ["/vaults", "/vaults?sort=tvl_desc&pageSize=7&page=2",
             f"/vaults/{held.vault}?chain=eth", "/vaults?tier=critical&limit=100"]
    async with cached_vault_api(storage_url, pop) as (api, base, session, ticks):
        writer, writer_db = api.writer, api.writer.db
        ratings = RatingsStore(writer_db)
        await ratings.migrate()

        async def bodies() -> list[bytes]:
            return await read_bodies(session, base, paths)

        async def detail() -> dict[str, object]:
            async with session.get(f"{base}/vaults/{held.vault}?chain=eth") as resp:
                body: dict[str, object] = await resp.json()
                return body

        first = await bodies()
        assert await bodies() == first  # served again, byte for byte

        # The writer re-rates the vault critical: list and detail both show it next.
        version = await read_version(writer_db)
        moved = rating_record("eth", held.vault, T0 + 86400, 95,
                              ["vault-emergency-shutdown"], True)
        await writer.write_batch([], lambda stored, updates: stored or {},
                                 [rating_row(moved)])
        assert await read_version(writer_db) == version + 1
        after = await past_the_bound(bodies, ticks, first)
        assert after[2] != first[2] and after[3] != first[3]
        shown = await detail()
        assert (shown["tier"], shown["rating"]) == ("critical", 95)
        async with session.get(base + "/vaults?tier=critical&limit=100") as resp:
            listed = await resp.json()
        assert held.vault in {i["address"] for i in listed["items"]}

        # A depeg rating of the underlying (the ratings store) reaches the detail's
        # composition within the same bound; the vault list does not depend on it.
        before = await read_versions(writer_db)
        await ratings.write_batch(
            [snapshot("eth", USDC_ETH, T0 + 86400, 91.0, "critical", 0.87)], [])
        assert await read_versions(writer_db) == (before[0], before[1] + 1)
        ticks[0] += 0.1
        await bodies()
        ticks[0] += 0.1
        depegged = await bodies()
        assert depegged[0] == after[0] and depegged[1] == after[1]
        composition = (await detail())["composition"]
        assert isinstance(composition, list)
        usdc = next(c for c in composition if c["address"] == USDC_ETH)
        assert usdc["depeg"]["tier"] == "critical"

        # What the cache serves is what a fresh app on the same rows builds.
        fresh = create_app(Config(api=ApiConfig(rate_limit_per_second=0)), api.db)
        async with serve(fresh) as base2:
            cached = await bodies()
            for path, body in zip(paths, cached, strict=True):
                async with session.get(base2 + path) as resp:
                    assert await resp.read() == body


async def test_a_bad_query_is_answered_every_time_not_cached(storage_url: str) -> None:
    """Errors are never cached: the same bad query is a 400 each time, and the same path
    with the store filled meanwhile is a 200 once the bound has passed (a 404 before)."""
    db = await connect(storage_url)
    try:
        app = create_app(Config(api=ApiConfig(ratings_check_seconds=0.1)), db)
        pop = population(3)
        record = pop.records[0]
        path = f"/vaults/{record.vault}?chain={record.chain}"
        async with served_on_a_clock(app, db, start=0.0) as (base, session, ticks):
            for _ in range(2):
                async with session.get(base + "/vaults?sort=nope") as resp:
                    assert resp.status == 400
                    assert (await resp.json())["parameter"] == "sort"
            async with session.get(base + path) as resp:
                assert resp.status == 404
            await load(VaultStore(db), pop)
            ticks[0] += 0.2
            async with session.get(base + path) as resp:
                assert resp.status == 200
                assert (await resp.json())["address"] == record.vault
    finally:
        await db.close()


async def test_retention_that_deletes_history_reaches_the_cached_detail(
        storage_url: str) -> None:
    """Retention is the vault store's other writer: history it deletes leaves the cached
    E5 body within the bound (a pass that deletes nothing shows nothing new)."""
    pop = population(3)
    # The oldest record: retention keeps the newest stored one (its window ends there).
    stamps = {r.vault: rating_row(r).ts for r in pop.records}
    record = min(pop.records, key=lambda r: stamps[r.vault])
    assert stamps[record.vault] < max(stamps.values())
    path = f"/vaults/{record.vault}?chain={record.chain}"
    async with cached_vault_api(storage_url, pop) as (api, base, session, ticks):
        writer = api.writer
        async def points() -> list[object]:
            async with session.get(base + path) as resp:
                assert resp.status == 200, await resp.text()
                history: dict[str, list[object]] = (await resp.json())["history"]
                return history["points"]

        assert len(await points()) == 1  # the one rating record load() wrote
        # Nothing older than the cutoff: nothing deleted, the cached body stays.
        assert await writer.apply_retention(days=90, now=T0) == 0
        ticks[0] += 0.2
        assert len(await points()) == 1
        # Every point older than the newest record: deleted, and the detail shows it.
        assert await writer.apply_retention(days=0, now=T0 + 10 * 86400) > 0
        ticks[0] += 0.1
        await points()  # the deletion is noticed (the body is rebuilding)
        ticks[0] += 0.1
        assert await points() == []
