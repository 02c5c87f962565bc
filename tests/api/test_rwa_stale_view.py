"""A rating whose price is old is listed as stale even if other ticks kept arriving."""

from __future__ import annotations

from monitor.api.rwa.view import item
from monitor.records import RatingSnapshot

ROW = {"peg_type": None, "episode_started": None, "tier_since": 1_700_000_000.0,
       "token_address": "0x" + "a" * 40, "chain": "eth", "reg_symbol": None,
       "snap_symbol": "USDC", "name": None, "peg_reference": None, "market_cap_usd": None,
       "collapsed": 0}


def snapshot(staleness: float, price_stale: float) -> RatingSnapshot:
    return RatingSnapshot(
        chain="eth", token_address="0x" + "a" * 40, symbol="USDC",
        timestamp="2023-11-14T22:15:00Z", rating=12.0, tier="ok", band_tier="ok",
        price_usd="0.999", peg_usd="1", deviation_pct=-0.1, staleness_seconds=staleness,
        signals=[], metrics={"stale": price_stale})


def test_stale_when_the_feed_is_quiet_or_only_the_price_is_old() -> None:
    assert item(ROW, snapshot(10.0, 0.0), 900)["stale"] is False
    assert item(ROW, snapshot(901.0, 1.0), 900)["stale"] is True
    # Slippage ticks every 10 s, but no price for an hour: stale.
    assert item(ROW, snapshot(10.0, 1.0), 900)["stale"] is True
