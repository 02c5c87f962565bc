"""The engine's saved structs (the state topic's contract): a token's whole state, and its
windows, tier and held rating.

A module of their own so that the modules using them can be compiled (monitor/compiled.py):
mypyc would turn a msgspec struct into a native class and change how it encodes.
:class:`WindowState` is re-exported from ``windows`` (``engine`` imports :class:`Saved`).
The tier and held rating a token carries are plain classes of ``tiers`` and ``rating``
(native in the compiled build, where a refresh reads and writes them):
``engine/tokenstate.py`` converts them to :class:`SavedTier` and :class:`SavedHeld` and
back.
"""

from __future__ import annotations

import msgspec

from ..records import Tier
from ..ticks import TickStruct


class WindowState(msgspec.Struct, array_like=True):
    """Serialisable contents of :class:`Windows` (for the state topic)."""

    head: int | None
    values: list[list[float]]
    last_price_ts: float | None
    last_dev: float | None
    base_s: float
    base_ts: float | None


class SavedTier(msgspec.Struct, array_like=True):
    """A token's :class:`~monitor.engine.tiers.TierState` as saved (state topic)."""

    tier: Tier = Tier.OK
    #: Event time the current tier was entered (None: never left the initial ok).
    since: float | None = None


class SavedHeld(msgspec.Struct, array_like=True):
    """A token's :class:`~monitor.engine.rating.Held` as saved (state topic): the
    published rating of the last refresh and when it was made."""

    rating: float = 0.0
    at: float | None = None
    #: Last event time the raw rating came within ``hold_margin`` of the current band.
    support_at: float | None = None


class Saved(msgspec.Struct, array_like=True):
    """One token's complete state, as written to the state topic."""

    version: int
    chain: str
    token: str
    symbol: str
    windows: WindowState
    tier: SavedTier
    obs: tuple[float | None, ...]
    price_text: str | None
    peg_text: str | None
    next_refresh: float | None
    last_applied: float | None
    last_eval: float | None
    max_seen: float | None
    last_tick_ts: float | None
    last_sig: tuple[float | None, ...] | None
    pending: list[TickStruct]
    #: Added in version 2 (a version 1 state restores with an empty memory).
    held: SavedHeld = msgspec.field(default_factory=SavedHeld)
    #: Event time of the newest spread observation received (the gate; see Engine).
    #: Added after version 2 as a trailing default, so older states still load.
    spread_mark: float | None = None
