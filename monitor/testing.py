"""Record builders for tests, benchmarks and integrators.

Build a well-formed :class:`~monitor.records.TierChangeEvent` or
:class:`~monitor.records.RatingSnapshot` in one call, for example to exercise a webhook
receiver or a consumer of ``depeg.tier-changes`` without running the engine. Event ids are
the real deterministic ones, so the same arguments give the same event.
"""

from __future__ import annotations

from .config import ModelConfig
from .engine.tiers import band
from .records import (
    EVENT_TYPE,
    RatingSnapshot,
    SignalValue,
    TierChangeData,
    TierChangeEvent,
    event_id,
)
from .timefmt import format_ts

SIGNALS = ("price_deviation", "slippage", "persistence_50bp", "persistence_100bp",
           "volatility_burst", "headroom")


def tier_change(chain: str, token: str, at: float, old_tier: str, new_tier: str, *,
                rating: float = 50.0, price: float = 1.0, symbol: str = "TKN") -> TierChangeEvent:
    """A tier change at event time ``at`` (epoch seconds) for a token pegged at 1 USD."""
    stamp = format_ts(at)
    data = TierChangeData(token, chain, symbol, old_tier, new_tier, rating,
                          (price - 1.0) * 100.0, f"{price:.6f}", "1.000000")
    return TierChangeEvent(EVENT_TYPE, event_id(chain, token, stamp, old_tier, new_tier), stamp,
                           data)


def rating_snapshot(chain: str, token: str, at: float, rating: float, tier: str | None = None,
                    *, price: float = 1.0, peg: float = 1.0, symbol: str = "TKN",
                    detail: bool = True) -> RatingSnapshot:
    """A rating snapshot; ``tier`` defaults to the rating's band. With ``detail`` it carries
    the six signals and 30 placeholder metrics, as the engine's snapshots do."""
    tier = tier or band(rating, ModelConfig()).value
    dev = (price - peg) / peg * 100.0
    signals = [SignalValue(n, dev if n == "price_deviation" else None,
                           min(1.0, rating / 100.0), 1 / 6, rating / 6, n == "price_deviation")
               for n in SIGNALS] if detail else []
    metrics: dict[str, float | None] = {}
    if detail:
        metrics = {f"m{i}": float(i) for i in range(30)}
        metrics["price_twap_5m"] = price
    return RatingSnapshot(chain, token, symbol, format_ts(at), rating, tier, tier,
                          f"{price:.6f}", f"{peg:.6f}", dev, 0.0, signals, metrics)
