"""A registered token with no price and peg yet is listed as unrated, never ok with 0."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from monitor.api.app import create_app
from monitor.config import Config
from monitor.storage import connect
from monitor.storage.ratings import RatingsStore
from tests.readapi_support import api_headers, registry_file, serve, snapshot

RATED, SILENT = "0x" + "1" * 40, "0x" + "2" * 40
REGISTRY = "".join(
    f'[[token]]\nchain = "eth"\naddress = "{a}"\nsymbol = "{s}"\nname = "{s} coin"\n'
    f'peg_type = "usd"\n' for a, s in ((RATED, "RTD"), (SILENT, "SLNT")))


async def test_registered_token_without_a_rating_is_listed_unrated(storage_url: str,
                                                                  tmp_path: Path) -> None:
    registry = registry_file(tmp_path, REGISTRY)
    db = await connect(storage_url)
    try:
        store = RatingsStore(db)
        await store.migrate()
        await store.write_batch([snapshot("eth", RATED, 1_700_000_100.0, 12.0, "ok", 1.0)], [])
        app = create_app(Config(registry=registry), db)
        async with serve(app) as base, aiohttp.ClientSession(
                headers=await api_headers(db)) as session:
            async with session.get(base + "/rwa") as resp:
                assert resp.status == 200
                body = await resp.json()
            async with session.get(base + "/rwa", params={"tier": "ok"}) as resp:
                ok_only = await resp.json()
    finally:
        await db.close()
    assert [i["address"] for i in body["items"]] == [RATED]
    [unrated] = body["unrated"]
    assert unrated["address"] == SILENT and unrated["symbol"] == "SLNT"
    assert unrated["rating"] is None and unrated["tier"] is None
    assert unrated["unrated_reason"] == "no price with a peg received yet"
    assert body["aggregates"]["unrated"] == 1
    # Never counted as ok: a tier filter does not list it.
    assert ok_only["unrated"] == [] and ok_only["aggregates"]["byTier"]["ok"] == 1
