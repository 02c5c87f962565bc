"""The engine's saved structs (the state topic's contract): windows, tier, held rating.

A module of their own so that the modules using them can be compiled (monitor/compiled.py):
mypyc would turn a msgspec struct into a native class and change how it encodes. Each is
re-exported from its old home (``windows``, ``tiers``, ``rating``).
"""

from __future__ import annotations

import msgspec

from ..records import Tier


class WindowState(msgspec.Struct, array_like=True):
    """Serialisable contents of :class:`Windows` (for the state topic)."""

    head: int | None
    values: list[list[float]]
    last_price_ts: float | None
    last_dev: float | None
    base_s: float
    base_ts: float | None


class TierState(msgspec.Struct, array_like=True):
    tier: Tier = Tier.OK
    #: Event time the current tier was entered (None: never left the initial ok).
    since: float | None = None


class Held(msgspec.Struct, array_like=True):
    """The published rating of the last refresh and when it was made (state topic)."""

    rating: float = 0.0
    at: float | None = None
    #: Last event time the raw rating came within ``hold_margin`` of the current band.
    support_at: float | None = None
