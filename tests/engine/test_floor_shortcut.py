"""``floor_rating``'s short-cut (no count while the held price and the low persistence
mark are clear of every floor line) gives the floor of the plain bucket counts.

The reference is ``Windows.buckets_below`` (the plain per-bucket extremes) and the first
floor, worst first, whose count reaches its minutes; the settings vary the lines around
the low persistence line, so the short-cut is taken, refused, and (a line above the low
line) never taken.
"""

from __future__ import annotations

import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from monitor.config import ModelConfig
from monitor.engine.params import params
from monitor.engine.rating import floor_rating
from monitor.engine.windows import Windows

deviations = st.one_of(
    st.floats(-0.08, 0.02, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.005, -0.01, -0.02, -0.05, -0.004, -0.0045, -0.0101]),
)
ticks_strategy = st.one_of(
    st.lists(st.tuples(st.floats(0, 4 * 3600, allow_nan=False), deviations),
             min_size=1, max_size=200),
    # A tick a bucket, some of them long gaps: windows that start and end on buckets.
    st.lists(st.tuples(st.integers(0, 240).map(lambda n: n * 60.0), deviations),
             min_size=1, max_size=120),
).map(lambda xs: sorted(xs, key=lambda x: x[0]))
_ABOVE_LOW = ModelConfig(floor_watch_below=0.004, floor_watch_minutes=2)  # above -low
configs = st.sampled_from([
    ModelConfig(),
    _ABOVE_LOW,
    ModelConfig(floor_critical_minutes=1, floor_warning_minutes=1, floor_watch_minutes=1),
    ModelConfig(floor_critical_minutes=2, floor_warning_minutes=3, floor_watch_minutes=2),
    ModelConfig(floor_window_seconds=900, floor_critical_minutes=10, floor_warning_minutes=12,
                floor_watch_minutes=5, persistence_low=0.01),
    ModelConfig(floor_critical_minutes=0, floor_warning_minutes=0, floor_watch_minutes=0),
])


def reference(w: Windows, now: float, cfg: ModelConfig) -> float:
    for below, minutes, at in params(cfg).floors:
        if w.buckets_below(now, cfg.floor_window_seconds, below) >= minutes:
            return at
    return 0.0


_ONE_MINUTE = ModelConfig(floor_critical_minutes=1, floor_warning_minutes=1,
                          floor_watch_minutes=1)


@settings(max_examples=800, deadline=None)
# A bucket held below the watch line and the low line, then the price back: the window
# starting at that bucket counts it (the low mark is the window's first bucket), the
# window starting one bucket later counts nothing (the mark just before it).
@example(ticks=[(0.0, -0.02), (120.0, 0.0)], cfg=_ONE_MINUTE, after=3540.0)
@example(ticks=[(0.0, -0.02), (120.0, 0.0)], cfg=_ONE_MINUTE, after=3600.0)
# A floor line above the low line: buckets beyond it leave no low mark.
@example(ticks=[(0.0, -0.0045), (300.0, 0.0)], cfg=_ABOVE_LOW, after=3300.0)
@given(ticks=ticks_strategy, cfg=configs,
       after=st.one_of(st.integers(0, 120).map(lambda n: n * 60.0),
                       st.floats(0, 8000, allow_nan=False)))
def test_floor_rating_equals_the_plain_counts(ticks: list[tuple[float, float]],
                                              cfg: ModelConfig, after: float) -> None:
    ring = math.ceil(max(3600, cfg.floor_window_seconds) / cfg.bucket_seconds) + 1
    w = Windows(cfg.bucket_seconds, ring, cfg.persistence_low, cfg.persistence_high,
                cfg.volatility_baseline_seconds)
    for ts, dev in ticks:
        w.add_price(ts, dev)
    now = ticks[-1][0] + after
    assert floor_rating(w, now, params(cfg)) == reference(w, now, cfg)
