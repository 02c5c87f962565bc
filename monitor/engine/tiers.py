"""The tier machine: bands on the rating, premium above peg, and anti-flapping.

Escalation is immediate: a missed alert costs money. Stepping down waits until the rating
has stayed below the lower band by a margin for a dwell time: measured on real feeds, the
plain band rule flips watch/ok every few minutes, which users rightly call spam.
"""

from __future__ import annotations

import msgspec

from ..config import ModelConfig
from ..records import SEVERITY, Tier


def band(rating: float, cfg: ModelConfig) -> Tier:
    if rating >= cfg.critical_at:
        return Tier.CRITICAL
    if rating >= cfg.warning_at:
        return Tier.WARNING
    if rating >= cfg.watch_at:
        return Tier.WATCH
    return Tier.OK


class TierState(msgspec.Struct, array_like=True):
    tier: Tier = Tier.OK
    since: float | None = None
    #: Event time since when a lower tier has been continuously indicated, and the highest
    #: rating seen since then (the step down goes no lower than that rating allows).
    lower_since: float | None = None
    lower_peak: float = 0.0


def target_tier(rating: float, deviation: float | None, current: Tier, cfg: ModelConfig) -> Tier:
    """The tier the rating and deviation indicate right now, before anti-flapping."""
    raw = band(rating, cfg)
    if SEVERITY[raw] >= SEVERITY[Tier.WARNING] or deviation is None:
        return raw  # a real risk outranks trading above peg
    threshold = cfg.premium_exit if current is Tier.PREMIUM else cfg.premium_enter
    return Tier.PREMIUM if deviation >= threshold else raw


def step(state: TierState, rating: float, deviation: float | None, now: float,
         cfg: ModelConfig) -> Tier | None:
    """Advance the machine at one refresh; returns the new tier when it changes."""
    current = state.tier
    target = target_tier(rating, deviation, current, cfg)
    if target is current:
        state.lower_since = None
        return None
    if SEVERITY[target] > SEVERITY[current] or (
        SEVERITY[target] == SEVERITY[current] == 0  # ok <-> premium: hysteresis is enough
    ):
        return _move(state, target, now)
    # De-escalation: only once the rating clears the band edge by the margin ...
    relaxed = target_tier(rating + cfg.deescalate_margin, deviation, current, cfg)
    if SEVERITY[relaxed] >= SEVERITY[current]:
        state.lower_since = None
        return None
    # ... and has stayed clear for the dwell time; then it steps down to the tier that the
    # highest rating of the dwell indicates, not to wherever the last refresh happened to be.
    if state.lower_since is None:
        state.lower_since = now
        state.lower_peak = rating
    else:
        state.lower_peak = max(state.lower_peak, rating)
    if now - state.lower_since >= cfg.deescalate_dwell_seconds:
        settled = target_tier(state.lower_peak + cfg.deescalate_margin, deviation, current, cfg)
        return _move(state, settled, now) if settled is not current else None
    return None


def _move(state: TierState, tier: Tier, now: float) -> Tier:
    state.tier = tier
    state.since = now
    state.lower_since = None
    state.lower_peak = 0.0
    return tier
