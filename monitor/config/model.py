"""The ``[model]`` section: every constant of the rating model (README "The rating model").

The engines read it on every tick, so it is a frozen struct checked once, at load.
"""

from __future__ import annotations

import msgspec

from ..config_section import require


class Weights(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Signal weights in percent (the spec's defaults). Missing signals renormalise."""

    price_deviation: float = 30.0
    slippage: float = 20.0
    persistence_50bp: float = 18.0
    persistence_100bp: float = 12.0
    volatility_burst: float = 10.0
    headroom: float = 10.0


class ModelConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Every constant of the rating model; README "The rating model" explains each choice."""

    weights: Weights = Weights()
    #: Width of one window bucket. Windows are rings of buckets, not lists of ticks.
    bucket_seconds: int = 60
    #: Price deviation is the time-weighted mean of (price - peg) / peg over this window.
    deviation_window_seconds: int = 300
    #: Downside deviation (fraction) that gives the full price signal: 5 %.
    deviation_full: float = 0.05
    #: Persistence: time below peg by more than these fractions, over the last hour.
    persistence_window_seconds: int = 3600
    persistence_low: float = 0.005
    persistence_high: float = 0.010
    #: Slippage of a 100k USD sell: no signal at or below ``floor``, full at ``full``.
    slippage_floor_bps: float = 10.0
    slippage_full_bps: float = 200.0
    #: A slippage observation older than this no longer counts as observed.
    slippage_max_age_seconds: int = 3600
    #: Volatility burst: realised variance over the recent window against an exponentially
    #: decayed baseline; no signal below ``burst_start`` x baseline volatility, full at
    #: ``burst_full`` x. ``volatility_floor`` (per-minute return std) keeps a flat feed from
    #: turning a 1 bp wiggle into a burst.
    volatility_window_seconds: int = 900
    volatility_baseline_seconds: int = 21600
    burst_start: float = 2.0
    burst_full: float = 4.0
    volatility_floor: float = 0.0005
    #: Headroom: oracle divergence |price - oracle| / peg that gives the full signal.
    oracle_divergence_full: float = 0.02
    oracle_max_age_seconds: int = 3600
    #: Headroom: cross-chain spread (max - min of price/peg over the asset's chains) that
    #: gives the full signal, and how long a spread observation counts (docs/cross-chain-spread.md).
    cross_chain_spread_full: float = 0.02
    cross_chain_spread_max_age_seconds: int = 900
    #: Tier bands on the 0-100 rating (spec: critical >= 80, warning 60-79, watch 40-59).
    #: The published tier is always the band of the published rating (premium aside).
    watch_at: float = 40.0
    warning_at: float = 60.0
    critical_at: float = 80.0
    #: Premium (the above-peg state, shown instead of ok): the 5-minute deviation must be
    #: at least this far above peg (a token at 1.0001 is not premium) and falls back once
    #: it is below ``premium_exit`` ...
    premium_enter: float = 0.005
    premium_exit: float = 0.0025
    #: ... and only after at least this many whole minutes of the last hour more than
    #: ``premium_enter`` above peg (one oracle round at 1.006 is not a premium).
    premium_minutes: int = 60
    #: Anti-flapping lives in the published rating: it is the highest of the raw rating,
    #: the hard floors and the previous published rating decayed linearly. While the token
    #: is under stress the decay is ``hold_decay_per_hour`` points an hour and stops at the
    #: lower edge of the current band as long as the raw rating is within ``hold_margin``
    #: points of that edge; once the price has not been more than ``persistence_low``
    #: below peg for ``calm_window_seconds`` (calm) it decays at ``calm_decay_per_hour``
    #: with no stop, so 100 falls below 40 in 1.5 hours: the all-clear.
    hold_decay_per_hour: float = 10.0
    hold_margin: float = 20.0
    hold_seconds: int = 3600
    calm_window_seconds: int = 900
    calm_decay_per_hour: float = 40.0
    #: Hard floors (monotone in evidence): a token whose price spent at least
    #: ``floor_<tier>_minutes`` whole minutes of the last ``floor_window_seconds`` more than
    #: ``floor_<tier>_below`` below peg is rated at least at that tier's band, whatever the
    #: other signals say. 0 minutes switches a floor off.
    floor_window_seconds: int = 3600
    floor_critical_below: float = 0.05
    floor_critical_minutes: int = 30
    floor_warning_below: float = 0.02
    floor_warning_minutes: int = 45
    floor_watch_below: float = 0.01
    floor_watch_minutes: int = 30
    #: A rating refresh every this many seconds of event time (aligned to the epoch).
    #: 0 means refresh on every tick.
    refresh_seconds: int = 300
    #: Rating snapshots are published at the first refresh of each period of this many
    #: seconds of event time (aligned to the epoch) per token, instead of at every refresh;
    #: tier changes are still evaluated (and published) at every refresh. 0: a snapshot at
    #: every refresh. Replay honours it too, so the daemon still equals replay.
    snapshot_seconds: int = 0
    #: Ticks may arrive this late (event time) and still be placed in order; later ones are
    #: dropped and counted.
    lateness_seconds: int = 120
    #: A tick dated more than this far ahead of the wall clock (and of its token's newest
    #: tick) is refused as ``future_ts`` (monitor/timesanity.py).
    future_tolerance_seconds: int = 300
    #: A token with no tick for this long (event time at refresh) is reported stale.
    stale_after_seconds: int = 900

    def __post_init__(self) -> None:
        floors = [(self.floor_critical_below, self.floor_critical_minutes),
                  (self.floor_warning_below, self.floor_warning_minutes),
                  (self.floor_watch_below, self.floor_watch_minutes)]
        checks = [
            (0 < self.watch_at <= self.warning_at <= self.critical_at <= 100,
             "need 0 < watch_at <= warning_at <= critical_at <= 100"),
            (self.hold_decay_per_hour > 0 and self.calm_decay_per_hour > 0,
             "hold_decay_per_hour and calm_decay_per_hour must be > 0 (else a tier never "
             "steps down)"),
            (0 <= self.premium_minutes <= 60, "premium_minutes must be within 0-60"),
            (self.snapshot_seconds >= 0, "snapshot_seconds must be >= 0"),
            (self.hold_margin >= 0 and self.hold_seconds >= 0,
             "hold_margin and hold_seconds must be >= 0"),
            (self.floor_window_seconds >= self.bucket_seconds > 0,
             "need floor_window_seconds >= bucket_seconds > 0"),
            (all(below > 0 and 0 <= minutes * 60 <= self.floor_window_seconds
                 for below, minutes in floors),
             "floor_*_below must be > 0 and floor_*_minutes within floor_window_seconds"),
        ]
        require("model", checks)
