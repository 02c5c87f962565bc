"""A rating whose price is old is listed as stale even if other ticks kept arriving."""

from __future__ import annotations

from typing import Any

from monitor.api.rwa.view import item
from monitor.records import RatingSnapshot

#: A row of the read query (any column type, as the database returns it).
ROW: dict[str, Any] = {"peg_type": None, "episode_started": None, "tier_since": 1_700_000_000.0,
       "token_address": "0x" + "a" * 40, "chain": "eth", "reg_symbol": None,
       "snap_symbol": "USDC", "name": None, "peg_reference": None, "market_cap_usd": None,
       "collapsed": 0, "received_at": 1_700_000_000.0}
NOW = 1_700_000_060.0


def snapshot(staleness: float, price_stale: float) -> RatingSnapshot:
    return RatingSnapshot(
        chain="eth", token_address="0x" + "a" * 40, symbol="USDC",
        timestamp="2023-11-14T22:15:00Z", rating=12.0, tier="ok", band_tier="ok",
        price_usd="0.999", peg_usd="1", deviation_pct=-0.1, staleness_seconds=staleness,
        signals=[], metrics={"stale": price_stale})


def test_stale_when_the_feed_is_quiet_or_only_the_price_is_old() -> None:
    assert item(ROW, snapshot(10.0, 0.0), 900, NOW)["stale"] is False
    assert item(ROW, snapshot(901.0, 1.0), 900, NOW)["stale"] is True
    # Slippage ticks every 10 s, but no price for an hour: stale.
    assert item(ROW, snapshot(10.0, 1.0), 900, NOW)["stale"] is True


def test_stale_when_nothing_refreshed_the_stored_rating() -> None:
    """A previous run's rating, or one the stopped monitor left behind, is never fresh."""
    fresh = snapshot(10.0, 0.0)
    assert item(ROW, fresh, 900, ROW["received_at"] + 899)["stale"] is False
    assert item(ROW, fresh, 900, ROW["received_at"] + 900)["stale"] is True
    assert item({**ROW, "received_at": None}, fresh, 900, NOW)["stale"] is True


async def test_the_store_keeps_when_a_rating_arrived(storage_url: str) -> None:
    """The API's wall-clock staleness reads ``received_at`` back from both databases."""
    from monitor.storage import ratings_read as reads
    from monitor.storage.db import connect
    from monitor.storage.ratings import RatingsStore

    db = await connect(storage_url)
    try:
        store = RatingsStore(db)
        await store.migrate()
        await store.write_batch([snapshot(10.0, 0.0)], [], received_at=NOW - 1000)
        flt, page = reads.ListFilter(), reads.PageRequest("score", "desc", 10, 0, None)
        row = (await reads.list_tokens(db, flt, page)).rows[0]
        assert item(row, snapshot(10.0, 0.0), 900, NOW)["stale"] is True
        await store.write_batch([snapshot(10.0, 0.0)], [], received_at=NOW - 10)
        row = (await reads.list_tokens(db, flt, page)).rows[0]
        assert item(row, snapshot(10.0, 0.0), 900, NOW)["stale"] is False
    finally:
        await db.close()
