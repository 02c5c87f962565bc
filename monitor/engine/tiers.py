"""The tier: the band of the published rating, with premium as the above-peg ok.

There is no anti-flapping state here any more: it lives in the published rating (a
decaying memory of the recent peak, see ``rating.py``), so every record satisfies
``tier == band(rating)``, except that a token in the ok band trading at least
``premium_enter`` above peg is ``premium`` (and stays so until it falls below
``premium_exit``). Any risk band outranks premium: a token still carrying a depeg's
rating is not shown as premium because its price overshot.
"""

from __future__ import annotations

from ..config import ModelConfig
from ..records import Tier
from .saved import TierState as TierState  # re-exported: its old home


def band(rating: float, cfg: ModelConfig) -> Tier:
    if rating >= cfg.critical_at:
        return Tier.CRITICAL
    if rating >= cfg.warning_at:
        return Tier.WARNING
    if rating >= cfg.watch_at:
        return Tier.WATCH
    return Tier.OK


def target_tier(rating: float, deviation: float | None, above_minutes: int, current: Tier,
                cfg: ModelConfig) -> Tier:
    """The tier a published rating gives, with the premium state for the ok band.

    Premium is entered when the price spent at least ``premium_minutes`` whole minutes of
    the last hour more than ``premium_enter`` above peg (a single oracle round at 1.006 is
    not a premium), and left once the 5-minute deviation is below ``premium_exit``.
    """
    raw = band(rating, cfg)
    if raw is not Tier.OK or deviation is None:
        return raw
    if current is Tier.PREMIUM:
        return Tier.PREMIUM if deviation >= cfg.premium_exit else Tier.OK
    entered = above_minutes >= cfg.premium_minutes and deviation >= cfg.premium_enter
    return Tier.PREMIUM if entered else Tier.OK


def step(state: TierState, rating: float, deviation: float | None, above_minutes: int,
         now: float, cfg: ModelConfig) -> Tier | None:
    """Set the tier for a published rating; returns the new tier when it changes."""
    target = target_tier(rating, deviation, above_minutes, state.tier, cfg)
    if target is state.tier:
        return None
    state.tier = target
    state.since = now
    return target
