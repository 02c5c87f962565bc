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

from ..config import ModelConfig
from .figures import Figures, figures_of
from .params import Params, params
from .signals import Observations
from .windows import Windows

Shape = list[tuple[int, float]]


class Steady:
    """The figures of a refresh made in the held state, and what they were made from."""

    __slots__ = ("figures", "fresh", "shape", "sig")

    def __init__(self, sig: object, shape: Shape, fresh: tuple[bool, bool, bool],
                 figures: Figures) -> None:
        self.sig = sig
        self.shape = shape
        self.fresh = fresh
        self.figures = figures


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
    shape = held_shape(w, cfg, now) if cfg.volatility_floor > 0 else None
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
    return Steady(last_sig, shape, fresh, figures), figures
