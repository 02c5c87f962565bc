"""A token's refresh: from its windows and observations to the published rating, the tier
and the records (``Engine``'s per-boundary step).

Apart from ``engine.py``, which takes ticks, holds them for lateness, applies them and
schedules the refreshes; this is what one refresh works out and emits. It reads the
engine's settings, counters and timestamp text as they are (``e``: its ``Engine``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..timefmt import format_ts
from .figures import figures_of
from .outputs import Output, rating_snapshot, tier_change
from .rating import publish_rating
from .rounding import NATIVE, round_to
from .steady import steady_figures_of
from .tiers import step_tier
from .tokenstate import _Token

if TYPE_CHECKING:  # the engine whose token this refreshes (its companion module)
    from .engine import Engine


def refresh(e: Engine, t: _Token, now: float, out: list[Output]) -> None:
    """Refresh token ``t`` of engine ``e`` at ``now``: its figures, published rating and
    tier; the rating snapshot (when due) and the tier change (when any) appended to
    ``out``."""
    c = e._p
    stats = e.stats
    stats.refreshes += 1
    # Due before last_eval moves: the first refresh of its snapshot period (the period
    # of the previous refresh is in the saved state, so a restore keeps the cadence).
    # Always with no cadence (0) or no earlier refresh; otherwise only when ``now`` is
    # in a later epoch-aligned period of ``every`` seconds than the previous refresh.
    snap = False
    if e.snapshots:
        every = c.snapshot_seconds
        previous = t.last_eval
        snap = every <= 0 or previous is None or now // every != previous // every
    t.last_eval = now
    w = t.windows
    if w.last_dev is None:
        # No price with a peg yet: the token is unrated. Rating it from slippage or
        # oracle ticks alone would publish a tier with no price behind it.
        stats.unrated += 1
        return
    tier = t.tier
    old = tier.tier
    if not snap:  # a quiet token's refresh may reuse the last one's (steady.py)
        # The last tick applied stands for the token's inputs: the very same object
        # while no tick is applied (None since a restore, until one is).
        steady, figures = steady_figures_of(t.steady, w, t.obs, t.sig_tick, c, now)
        t.steady = steady
        raw, floor, deviation, calm, above = figures
        held = t.held
        before, at = held.rating, held.at
        q = t.quiet
        if q is not None and at is not None and q[0] is steady and q[1] is old \
                and now - at == q[2] and before == q[3] and (before != 0.0 or _same_zero(
                    before, q[3])):
            # The inputs of the last such refresh, bit for bit (the same steady memo, so
            # the same figures; the same held rating, ``0.0`` and ``-0.0`` told apart; the
            # same elapsed time): ``publish_rating`` (calm: a function of these alone)
            # finds that rating again and ``step_tier`` no change. Its writes, the rating
            # aside.
            held.support_at = None
            held.at = now
            return
        rating = publish_rating(held, raw, floor, calm, now, c)
        changed = step_tier(tier, rating, deviation, above, now, c)
        if changed is None:
            if steady is not None and calm and at is not None and rating == before and (
                    rating != 0.0 or _same_zero(rating, before)):
                t.quiet = (steady, old, now - at, rating)
            return
        stamp = stamp_of(e, now)
    else:
        figures, signals, metrics = figures_of(w, t.obs, c, now, True)
        raw, floor, deviation, calm, above = figures
        rating = publish_rating(t.held, raw, floor, calm, now, c)
        changed = step_tier(tier, rating, deviation, above, now, c)
        stamp = stamp_of(e, now)
    # ``round`` with digits; compiled, mostly without its decimal conversion.
    deviation_pct = round_to(deviation * 100.0, 4, 1e4) if NATIVE \
        else round(deviation * 100.0, 4)
    if snap:
        metrics["rating_raw"] = raw  # keys evaluate placed: no kwargs dict, no update
        metrics["rating_floor"] = floor
        metrics["calm"] = float(calm)
        out.append(rating_snapshot(t, now, stamp, rating, signals, metrics,
                                   deviation_pct, c))
    if changed is not None:
        stats.transitions += 1
        out.append(tier_change(t, stamp, old, changed, rating, deviation_pct))


def _same_zero(x: float, y: float) -> bool:
    """Whether two zeros have the same sign: the same object (the pure build keeps one
    object in the held rating and the memo), else the signs compared (compiled, a float
    is a new box each time it is read)."""
    return x is y or math.copysign(1.0, x) == math.copysign(1.0, y)


def stamp_of(e: Engine, now: float) -> str:
    """``format_ts(now)``: every token refreshes at the same boundaries, so the last
    time stamped and its text are kept (``format_ts`` was ~13.8 k instructions)."""
    if now == e._stamp_at:
        return e._stamp
    e._stamp = stamp = format_ts(now)
    e._stamp_at = now
    return stamp
