"""Quiet refreshes: a refresh that provably works out the same figures as the last one
reuses them instead of reading the windows again.

Most refreshes of a replay belong to quiet feeds (a Chainlink round a day, refreshed every
5 minutes), and in the hours after such a feed's last price every window a refresh reads
lies wholly past the ring's newest bucket: the figures then depend on the held price and
on where each window starts and ends relative to a bucket, not on the ring. The figures
(:class:`~monitor.engine.figures.Figures`) of a refresh are reused when, since the
refresh that made them,

1. no tick was applied: the ``last_sig`` passed is the very same object (the engine
   passes the last tick it applied, a new object for every tick it applies, None from a
   restore until the first; duplicates apply nothing), so the windows and the
   observations are unchanged;
2. every window the refresh reads (the four the rating reads, the floor window and the
   premium hour) starts after the ring's head and after the bucket of the last price, at
   both refreshes. A window's reads are then its open interval alone: the held deviation
   over ``now - first_bucket * bucket`` seconds (``readings.read_fields``: the ring part
   is empty, the squared changes are 0.0), and its counts are ``end_b - first_b + 1``
   buckets beyond a line or none (``readings.count_beyond``: the ring part is empty, no
   flags are touched). Both refreshes must give each window the same ``end_b - first_b``
   and the same ``now - first_b * bucket`` (the very float expression the reads use);
3. the slippage, oracle and spread observations are each fresh at both or stale at both
   (the same comparisons ``signals.evaluate`` makes);
4. ``volatility_floor > 0``: with no squared changes in the volatility window the burst
   ratio is ``0.0 / max(baseline, floor)``, exactly 0.0 whatever the baseline has decayed
   to, so the decaying baseline is the one input that moves and it changes nothing.

Everything else a refresh reads is configuration. Whatever else happens (a tick, a
restore, detail refreshes in between) simply fails condition 1 or 2 and the figures are
worked out again. tests/engine/test_steady.py checks with hypothesis that an engine
with this short-cut gives the same events, states and figures as one without.
"""

from __future__ import annotations

import math
from typing import Final

from ..config import ModelConfig
from .figures import Figures, figures_of
from .params import Params, params
from .signals import Observations
from .windows import Windows

Shape = list[tuple[int, float]]


class Steady:
    """The figures of a refresh made in the held state, and what they were made from."""

    __slots__ = ("at", "figures", "fresh", "shape", "sig")

    def __init__(self, sig: object, shape: Shape, fresh: tuple[bool, bool, bool],
                 figures: Figures, at: float = math.nan) -> None:
        self.sig = sig
        self.shape = shape
        self.fresh = fresh
        self.figures = figures
        #: The refresh time these were made at, when a later refresh a whole number of
        #: buckets on is known to have the same shape and freshness (:func:`_aligned`);
        #: NaN (after no time) otherwise.
        self.at = at


#: Below this every whole number of seconds and every difference of two is exact.
_EXACT: Final = 2.0 ** 52
_STALE: Final = (False, False, False)


def _aligned(now: float, fresh: tuple[bool, bool, bool], cfg: Params) -> float:
    """``now`` when a later refresh of the same held state ``d`` seconds on, ``d`` a whole
    number of buckets, has the very same shape and freshness as this one; else NaN.

    Freshness: each observation is stale here and so stays (``now - ts`` only grows with
    ``now``). Shape: with ``now``, the bucket and every window length whole numbers of
    seconds below 2**52, every figure ``held_shape`` works out is exact: ``end_b`` and
    ``end_b - first_b`` move by ``d / bucket`` (``math.ceil`` of a correctly rounded
    quotient of two whole numbers below 2**53 is the exact ceiling: a quotient that is not
    whole is at least ``1/bucket`` from the next whole one, far more than its rounding),
    ``now - first_b * bucket`` does not move, the clip to the ring's oldest bucket moves
    with them, and both tests (``first_b > edge``, ``since <= start``) only get truer as
    ``now`` grows. For a later ``now`` below 2**52, ``now - at`` is then exact, so
    ``(now - at) % bucket == 0.0`` (``fmod``: exact) says ``d`` is a whole number of
    buckets, and ``now`` is whole too."""
    if fresh == _STALE and cfg.whole_lengths and 0.0 <= now < _EXACT and now.is_integer():
        return now
    return math.nan


def held_shape(w: Windows, cfg: Params, now: float) -> Shape | None:
    """Per window read at ``now``, ``(end_b - first_b, now - first_b * bucket)``, when
    every one starts after the ring's head and the last price's bucket; else None."""
    head, since = w.head, w.last_price_ts
    if head is None or since is None or w.last_dev is None:
        return None
    bucket = w.bucket
    end_b = int(now // bucket)
    if now == end_b * bucket:
        end_b -= 1
    edge = int(since // bucket)  # the bucket the held stretch starts in
    if head > edge:
        edge = head
    oldest = end_b - w.size + 1
    shape: Shape = []
    for seconds in cfg.lengths:
        first_b = math.ceil((now - seconds) / bucket)
        if first_b < oldest:
            first_b = oldest
        start = first_b * bucket
        if first_b <= edge or since > start:
            return None
        shape.append((end_b - first_b, now - start))
    return shape


def steady_figures(memo: Steady | None, w: Windows, obs: Observations, last_sig: object,
                   cfg: ModelConfig, now: float) -> tuple[Steady | None, Figures]:
    """The figures of a refresh without detail at ``now``, and the memo to keep for the
    next refresh (``memo``: the one this returned last time for the token)."""
    return steady_figures_of(memo, w, obs, last_sig, params(cfg), now)


def steady_figures_of(memo: Steady | None, w: Windows, obs: Observations, last_sig: object,
                      cfg: Params, now: float) -> tuple[Steady | None, Figures]:
    """:func:`steady_figures` with the settings already looked up (the engine's call)."""
    if memo is not None and memo.sig is last_sig:
        # The same held state a whole number of buckets after an aligned memo: the same
        # shape and freshness without working them out (``_aligned``; NaN fails ``>=``).
        at = memo.at
        if now >= at and now < _EXACT and (now - at) % w.bucket == 0.0:
            return memo, memo.figures
    # A price held for less than the shortest window less a bucket lies in every window
    # (``held_shape`` would give None): a token with ticks, most of its refreshes. Not
    # keeping a memo is always safe (the figures are worked out in full).
    since = w.last_price_ts
    shape = held_shape(w, cfg, now) if cfg.volatility_floor > 0 and not (
        since is not None and now - since < cfg.held_within) else None
    if shape is None:
        return None, figures_of(w, obs, cfg, now, False)[0]
    # Whether slippage, oracle and spread are young enough to count (signals.evaluate):
    # inline, as it runs at every quiet refresh.
    slip_ts, oracle_ts, spread_ts = obs.slippage_ts, obs.oracle_ts, obs.spread_ts
    fresh = (slip_ts is not None and now - slip_ts <= cfg.slippage_max_age_seconds,
             oracle_ts is not None and now - oracle_ts <= cfg.oracle_max_age_seconds,
             spread_ts is not None and now - spread_ts <= cfg.cross_chain_spread_max_age_seconds)
    if memo is not None and memo.sig is last_sig and memo.shape == shape \
            and memo.fresh == fresh:
        return memo, memo.figures
    figures = figures_of(w, obs, cfg, now, False)[0]
    return Steady(last_sig, shape, fresh, figures, _aligned(now, fresh, cfg)), figures
