"""The records a refresh publishes: the rating snapshot and the tier change event.

What a refresh (``refresh.refresh``) works out (the rating, the tier, the signals and metrics)
turned into the record types of ``monitor.records``; apart from the engine's tick and
refresh code because it is the outputs' shape, not the model.
"""

from __future__ import annotations

from ..records import (
    EVENT_TYPE,
    RatingSnapshot,
    SignalValue,
    Tier,
    TierChangeData,
    TierChangeEvent,
    event_id,
)
from .params import Params
from .tiers import tier_band
from .tokenstate import _Token

#: What the engine publishes: rating snapshots and tier change events.
Output = TierChangeEvent | RatingSnapshot


def rating_snapshot(t: _Token, now: float, stamp: str, rating: float,
                    signals: list[SignalValue], metrics: dict[str, float | None],
                    deviation_pct: float | None, p: Params) -> RatingSnapshot:
    """The snapshot of a refresh at ``now`` (``stamp``: its time as text) with the
    signals and metrics ``figures_of`` gave (the engine's keys filled in here)."""
    last_tick_ts = t.last_tick_ts
    staleness = now - last_tick_ts if last_tick_ts is not None else 0.0
    price_ts = t.obs.price_ts
    price_age = now - price_ts if price_ts is not None else staleness
    metrics["rating"] = rating
    metrics["staleness_seconds"] = staleness
    # Stale: the *price* is older than stale_after_seconds (slippage or oracle ticks
    # alone do not make a rating fresh); the rating is still the model's best estimate
    # from the last price held, and says so.
    metrics["stale"] = 1.0 if price_age >= p.stale_after_seconds else 0.0
    tier = t.tier
    since = tier.since
    metrics["seconds_in_tier"] = now - since if since is not None else None
    # ``observed_weight_pct``: figures_of set it. ``_value_``: the enum's value
    # without the ``value`` property's Python-level getter. Positional fields: the
    # struct's order (records.RatingSnapshot). A whole number of seconds (the usual
    # staleness: tick and refresh times are) is its own ``round(x, 3)``.
    return RatingSnapshot(
        t.chain, t.token, t.symbol, stamp, rating, tier.tier._value_,
        tier_band(rating, p)._value_, t.price_text, t.peg_text, deviation_pct,
        staleness if staleness.is_integer() else round(staleness, 3), signals, metrics,
    )


def tier_change(t: _Token, stamp: str, old: Tier, new: Tier, rating: float,
                deviation_pct: float) -> TierChangeEvent:
    """The event of a token's tier moving from ``old`` to ``new`` at ``stamp``."""
    return TierChangeEvent(
        event_type=EVENT_TYPE,
        event_id=event_id(t.chain, t.token, stamp, old.value, new.value),
        timestamp=stamp,
        data=TierChangeData(
            token_address=t.token, chain=t.chain, symbol=t.symbol,
            old_tier=old.value, new_tier=new.value, risk_score=rating,
            deviation_pct=deviation_pct,
            price_usd=t.price_text or "", peg_usd=t.peg_text or "",
        ),
    )
