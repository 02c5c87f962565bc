"""Hand-made rating snapshots and tier changes for the ratings store and read API tests."""

from __future__ import annotations

from collections.abc import Iterable

from monitor.records import (
    EVENT_TYPE,
    RatingSnapshot,
    SignalValue,
    TierChangeData,
    TierChangeEvent,
    event_id,
)
from monitor.timefmt import format_ts

SIGNALS = ("price_deviation", "slippage", "persistence_50bp", "persistence_100bp",
           "volatility_burst", "headroom")
T0 = 1_678_500_000.0  # 2023-03-11T01:46:40Z, a multiple of 300 s away from nothing special


def snapshot(chain: str, token: str, ts: float, rating: float, tier: str,
             price: float = 1.0, peg: float = 1.0, symbol: str = "TKN") -> RatingSnapshot:
    dev = (price - peg) / peg * 100.0
    signals = [SignalValue(n, dev if n == "price_deviation" else None,
                           min(1.0, rating / 100.0), 1 / 6, rating / 6, n == "price_deviation")
               for n in SIGNALS]
    metrics: dict[str, float | None] = {f"m{i}": float(i) for i in range(30)}
    metrics["price_twap_5m"] = price
    return RatingSnapshot(chain, token, symbol, format_ts(ts), rating, tier, tier,
                          f"{price:.6f}", f"{peg:.6f}", dev, 0.0, signals, metrics)


def change(chain: str, token: str, ts: float, old: str, new: str, rating: float = 50.0,
           price: float = 1.0, symbol: str = "TKN") -> TierChangeEvent:
    stamp = format_ts(ts)
    data = TierChangeData(token, chain, symbol, old, new, rating, (price - 1.0) * 100.0,
                          f"{price:.6f}", "1.000000")
    return TierChangeEvent(EVENT_TYPE, event_id(chain, token, stamp, old, new), stamp, data)


def story(chain: str, token: str, tiers: Iterable[tuple[str, float, float]], start: float = T0,
          step: float = 300.0) -> tuple[list[RatingSnapshot], list[TierChangeEvent]]:
    """Snapshots every ``step`` seconds from (tier, rating, price) triples, with the tier
    changes between consecutive ones."""
    snaps: list[RatingSnapshot] = []
    events: list[TierChangeEvent] = []
    prev = "ok"
    for i, (tier, rating, price) in enumerate(tiers):
        ts = start + i * step
        snaps.append(snapshot(chain, token, ts, rating, tier, price))
        if tier != prev:
            events.append(change(chain, token, ts, prev, tier, rating, price))
            prev = tier
    return snaps, events
