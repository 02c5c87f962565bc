"""The model settings a refresh reads, copied once per configuration onto a plain class.

``ModelConfig`` is a msgspec struct, which the compiled build (monitor/compiled.py) cannot
compile: every ``cfg.field`` it reads is a generic attribute lookup through the type's
descriptors, some forty of them per refresh. :class:`Params` holds the same values (the
very objects, not converted) as attributes of a class the build makes native, plus the
per-configuration tables the refresh used to look up through caches; pure, it reads as
fast as the struct. The public functions that take a ``ModelConfig`` keep doing so and
go through :func:`params`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from operator import itemgetter
from typing import Final

from ..config import ModelConfig
from .memo import per_config
from .readplan import Plan, make_plan
from .ringfields import _COV, _DEV, _HIGH, _LOW, _MAX, _MIN, _R2, _TICKS

#: The signals of the rating, in the order they are scored, combined and published.
SIGNAL_NAMES: Final = ("price_deviation", "slippage", "persistence_50bp", "persistence_100bp",
                       "volatility_burst", "headroom")


class Params:
    """What the refresh path reads of one ``ModelConfig``."""

    def __init__(self, cfg: ModelConfig) -> None:
        self.config = cfg
        self.deviation_full = cfg.deviation_full
        self.persistence_window_seconds = cfg.persistence_window_seconds
        #: The persistence window in minutes (the division ``evaluate`` made per refresh).
        self.persistence_window_minutes = cfg.persistence_window_seconds / 60.0
        self.persistence_low = cfg.persistence_low
        self.slippage_floor_bps = cfg.slippage_floor_bps
        self.slippage_full_bps = cfg.slippage_full_bps
        self.slippage_max_age_seconds = cfg.slippage_max_age_seconds
        self.volatility_window_seconds = cfg.volatility_window_seconds
        self.burst_start = cfg.burst_start
        self.burst_full = cfg.burst_full
        self.volatility_floor = cfg.volatility_floor
        self.oracle_divergence_full = cfg.oracle_divergence_full
        self.oracle_max_age_seconds = cfg.oracle_max_age_seconds
        self.cross_chain_spread_full = cfg.cross_chain_spread_full
        self.cross_chain_spread_max_age_seconds = cfg.cross_chain_spread_max_age_seconds
        self.watch_at = cfg.watch_at
        self.warning_at = cfg.warning_at
        self.critical_at = cfg.critical_at
        self.premium_enter = cfg.premium_enter
        self.premium_exit = cfg.premium_exit
        self.premium_minutes = cfg.premium_minutes
        self.hold_decay_per_hour = cfg.hold_decay_per_hour
        self.hold_margin = cfg.hold_margin
        self.hold_seconds = cfg.hold_seconds
        self.calm_decay_per_hour = cfg.calm_decay_per_hour
        self.floor_window_seconds = cfg.floor_window_seconds
        self.snapshot_seconds = cfg.snapshot_seconds
        self.stale_after_seconds = cfg.stale_after_seconds
        weights = cfg.weights
        #: Every signal's weight by name.
        self.weights: dict[str, float] = {
            name: float(getattr(weights, name)) for name in weights.__struct_fields__}
        #: The weights of the six signals, in the order ``signals.evaluate`` makes them.
        self.signal_weights: tuple[float, ...] = tuple(self.weights[n] for n in SIGNAL_NAMES)
        #: ``(fraction below peg, whole minutes, rating floor)`` per hard floor, worst
        #: first (the floors that are on), and the deviation each one's buckets must stay
        #: under.
        self.floors: tuple[tuple[float, int, float], ...] = tuple(
            (below, minutes, at) for below, minutes, at in (
                (cfg.floor_critical_below, cfg.floor_critical_minutes, cfg.critical_at),
                (cfg.floor_warning_below, cfg.floor_warning_minutes, cfg.warning_at),
                (cfg.floor_watch_below, cfg.floor_watch_minutes, cfg.watch_at),
            ) if minutes > 0
        )
        self.floor_lines: tuple[float, ...] = tuple(-below for below, _, _ in self.floors)
        #: The highest floor line (a held price at or above it meets no floor; -inf
        #: with no floor on, when every floor rating is 0.0 anyway).
        self.floor_top: float = max(self.floor_lines) if self.floor_lines else -math.inf
        #: The premium count's one line (a tuple built once: it keys the ring's flags).
        self.premium_lines: tuple[float, ...] = (cfg.premium_enter,)
        #: The windows and fields a refresh without detail reads, in ``evaluate``'s order
        #: (the calm window's lowest deviation last).
        #: Neighbours of one length are one read with both fields (with the defaults the
        #: volatility and calm windows: ``read_fields`` lists the same values in the same
        #: order, working out the window once).
        self.reads: tuple[tuple[float, tuple[int, ...]], ...] = _merged((
            (float(cfg.deviation_window_seconds), (_DEV, _COV)),
            (float(cfg.persistence_window_seconds), (_LOW, _HIGH)),
            (float(cfg.volatility_window_seconds), (_R2,)),
            (float(cfg.calm_window_seconds), (_MIN,))))
        #: The windows and fields a refresh with detail reads, and where ``evaluate`` picks
        #: its values (:func:`_detail_reads`: made once per configuration, here).
        spec, picks, positions = _detail_reads(cfg)
        self.detail_reads: tuple[tuple[tuple[float, tuple[int, ...]], ...], Picks] = (
            spec, picks)
        #: The same reads as plans of the pure build's ``readplan.read_plan`` (their
        #: values in the order ``evaluate`` unpacks them).
        self.reads_plan: Plan = make_plan(self.reads)
        self.detail_plan: Plan = make_plan(spec, positions)
        #: Every window length a refresh without detail reads (reads, floors, premium).
        self.lengths: tuple[float, ...] = tuple(sorted(
            {s for s, _ in self.reads} | {float(cfg.floor_window_seconds), 3600.0}))
        #: A price held for less than this lies in every one of those windows (the steady
        #: memo is not tried: ``held_shape`` would find the held price inside a window).
        self.held_within: float = self.lengths[0] - cfg.bucket_seconds
        #: The bucket and every one of those lengths a whole number of seconds (the steady
        #: memo's aligned short-cut, monitor/engine/steady.py, relies on it).
        self.whole_lengths: bool = float(cfg.bucket_seconds).is_integer() and all(
            s.is_integer() for s in self.lengths)


def _merged(reads: tuple[tuple[float, tuple[int, ...]], ...],
            ) -> tuple[tuple[float, tuple[int, ...]], ...]:
    """``reads`` with each run of neighbours of one length made one read of their fields
    in order (``read_fields`` then gives the same list)."""
    merged: list[tuple[float, tuple[int, ...]]] = []
    for seconds, which in reads:
        if merged and merged[-1][0] == seconds:
            merged[-1] = (seconds, merged[-1][1] + which)
        else:
            merged.append((seconds, which))
    return tuple(merged)


#: The metric snapshot's TWAP windows, in minutes (``evaluate`` names their metrics).
_TWAP_MINUTES = (1, 5, 15, 60)


Picks = Callable[[list[float]], tuple[float, ...]]


def _detail_reads(cfg: ModelConfig) -> tuple[tuple[tuple[float, tuple[int, ...]], ...],
                                             Picks, list[int]]:
    """The windows and fields a refresh with detail reads: the TWAP windows, then the
    deviation, persistence, volatility and calm windows (``signals.evaluate`` unpacks them in
    this order). Only the fields used are summed, over the same slices as ``Windows.window``
    (the same floats): a snapshot read every field of five windows before.

    Returned as each distinct window once with the union of its fields, and per value
    ``evaluate`` unpacks, its position in that read (an ``itemgetter``, so the picking
    is one C call): with the defaults the deviation
    window is the 5-minute TWAP's and the persistence and volatility windows share fields
    with the 60- and 15-minute TWAPs (16 sums instead of 19; a field of a window is the
    same float however often it is read). Also the positions the ``itemgetter`` picks."""
    wanted = (*((m * 60.0, (_DEV, _COV)) for m in _TWAP_MINUTES),
              (float(cfg.deviation_window_seconds), (_DEV, _COV)),
              (float(cfg.persistence_window_seconds), (_COV, _LOW, _HIGH, _TICKS, _MIN, _MAX)),
              (float(cfg.volatility_window_seconds), (_R2, _TICKS)),
              (float(cfg.calm_window_seconds), (_MIN,)))
    fields: dict[float, list[int]] = {}
    for seconds, which in wanted:
        have = fields.setdefault(seconds, [])
        have += [i for i in which if i not in have]
    spec = tuple((seconds, tuple(which)) for seconds, which in fields.items())
    at: dict[tuple[float, int], int] = {}
    for seconds, which in spec:
        for i in which:
            at[(seconds, i)] = len(at)
    positions = [at[(seconds, i)] for seconds, which in wanted for i in which]
    return spec, itemgetter(*positions), positions


@per_config
def params(cfg: ModelConfig) -> Params:
    """The :class:`Params` of ``cfg`` (made once per configuration object)."""
    return Params(cfg)
