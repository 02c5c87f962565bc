"""The tier: the band of the published rating, with premium as the above-peg ok.

There is no anti-flapping state here any more: it lives in the published rating (a
decaying memory of the recent peak, see ``rating.py``), so every record satisfies
``tier == band(rating)``, except that a token in the ok band trading at least
``premium_enter`` above peg is ``premium`` (and stays so until it falls below
``premium_exit``). Any risk band outranks premium: a token still carrying a depeg's
rating is not shown as premium because its price overshot.
"""

from __future__ import annotations

from typing import Final

from ..config import ModelConfig
from ..records import Tier
from .params import Params, params

#: The tiers as module constants: the compiled build (monitor/compiled.py) reads a Final
#: from a C static, where ``Tier.OK`` is a global lookup and an attribute lookup each time.
_OK: Final = Tier.OK
_WATCH: Final = Tier.WATCH
_WARNING: Final = Tier.WARNING
_CRITICAL: Final = Tier.CRITICAL
_PREMIUM: Final = Tier.PREMIUM


class TierState:
    """A token's tier and the event time it was entered (None: never left the initial
    ok). A plain class, native in the compiled build, where every refresh reads it
    (a msgspec struct's fields are read there through the generic attribute lookup);
    saved as :class:`~monitor.engine.saved.SavedTier`."""

    __slots__ = ("since", "tier")

    def __init__(self, tier: Tier = Tier.OK, since: float | None = None) -> None:
        self.tier = tier
        self.since = since

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TierState):
            return NotImplemented
        return self.tier is other.tier and self.since == other.since

    __hash__ = None  # type: ignore[assignment]  # mutable, as the struct it replaced

    def __repr__(self) -> str:
        return f"TierState(tier={self.tier!r}, since={self.since!r})"


def band(rating: float, cfg: ModelConfig) -> Tier:
    return tier_band(rating, params(cfg))


def tier_band(rating: float, cfg: Params) -> Tier:
    """The band ``rating`` is in (``band`` with the settings already looked up)."""
    if rating >= cfg.critical_at:
        return _CRITICAL
    if rating >= cfg.warning_at:
        return _WARNING
    if rating >= cfg.watch_at:
        return _WATCH
    return _OK


def step(state: TierState, rating: float, deviation: float | None, above_minutes: int,
         now: float, cfg: ModelConfig) -> Tier | None:
    """Set the tier for a published rating; returns the new tier when it changes."""
    return step_tier(state, rating, deviation, above_minutes, now, params(cfg))


def step_tier(state: TierState, rating: float, deviation: float | None, above_minutes: int,
              now: float, cfg: Params) -> Tier | None:
    """:func:`step` with the settings already looked up (the engine's per-refresh call).

    The tier is the band of the rating (:func:`tier_band`, written out here: this runs at
    every refresh), with the premium state for the ok band: premium is entered when the
    price spent at least ``premium_minutes`` whole minutes of the last hour more than
    ``premium_enter`` above peg (a single oracle round at 1.006 is not a premium), and
    left once the 5-minute deviation is below ``premium_exit``."""
    current = state.tier
    if rating >= cfg.critical_at:
        target = _CRITICAL
    elif rating >= cfg.warning_at:
        target = _WARNING
    elif rating >= cfg.watch_at:
        target = _WATCH
    elif deviation is None:
        target = _OK
    elif current is _PREMIUM:
        target = _PREMIUM if deviation >= cfg.premium_exit else _OK
    elif above_minutes >= cfg.premium_minutes and deviation >= cfg.premium_enter:
        target = _PREMIUM
    else:
        target = _OK
    if target is current:
        return None
    state.tier = target
    state.since = now
    return target
