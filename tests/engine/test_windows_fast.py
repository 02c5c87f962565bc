"""The refresh's own window reads give the very floats and counts of the plain ones.

``Windows.fields`` and ``Windows.count_beyond`` are what a refresh calls; ``window`` and
``bucket_extremes`` are the plain recomputation they replaced, kept as the reference.
Equality is exact (``==`` on floats, compared by ``repr`` so -0.0 and 0.0 differ): the
replay's outputs are compared byte for byte (tests/test_replay_golden.py), so a last-bit
difference is a failure, not a rounding error.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.engine.windows import COV, DEV, HIGH, LOW, MAX, MIN, R2, TICKS, Windows

BUCKET = 60
LOW_LINE, HIGH_LINE, TAU = 0.005, 0.01, 21600.0
ALL_FIELDS = (DEV, COV, LOW, HIGH, R2, TICKS, MIN, MAX)

# Deviations with many distinct last bits (sums of them are order-sensitive), some
# exactly on the lines, and ticks dense, sparse and with long gaps (a ring that wraps,
# rolls over, and is empty).
deviations = st.one_of(
    st.floats(-0.2, 0.05, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.005, -0.01, -0.02, -0.05, 0.005, 0.0025]),
)
ticks_strategy = st.lists(
    st.tuples(st.floats(0, 6 * 3600, allow_nan=False), deviations), min_size=0, max_size=300,
).map(lambda xs: sorted(xs, key=lambda x: x[0]))


def filled(ticks: list[tuple[float, float]], size: int) -> Windows:
    w = Windows(BUCKET, size, LOW_LINE, HIGH_LINE, TAU)
    for ts, dev in ticks:
        w.add_price(ts, dev)
    return w


def same(a: list[float], b: list[float]) -> bool:
    return [repr(x) for x in a] == [repr(x) for x in b]


@settings(max_examples=300, deadline=None)
@given(ticks=ticks_strategy, size=st.sampled_from([61, 60, 7]),
       after=st.one_of(st.integers(0, 200).map(lambda n: n * 60.0),
                       st.floats(0, 12000, allow_nan=False)),
       seconds=st.sampled_from([60, 300, 900, 3600, 4000, 30, 90]),
       which=st.lists(st.sampled_from(ALL_FIELDS), max_size=8))
def test_fields_equal_the_plain_window(ticks: list[tuple[float, float]], size: int,
                                        after: float, seconds: int, which: list[int]) -> None:
    w = filled(ticks, size)
    now = (ticks[-1][0] if ticks else 0.0) + after
    reference = list(w.window(now, float(seconds)))
    assert same(w.fields(now, seconds, ALL_FIELDS), reference)
    assert same(w.fields(now, seconds, which), [reference[i] for i in which])


@settings(max_examples=300, deadline=None)
@given(ticks=ticks_strategy, size=st.sampled_from([61, 60, 7]),
       after=st.one_of(st.integers(0, 200).map(lambda n: n * 60.0),
                       st.floats(0, 12000, allow_nan=False)),
       seconds=st.sampled_from([60, 900, 3600, 4000, 30]),
       levels=st.lists(st.sampled_from([0.0, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1]),
                       max_size=4))
def test_counts_equal_the_plain_bucket_extremes(
        ticks: list[tuple[float, float]], size: int, after: float, seconds: int,
        levels: list[float]) -> None:
    w = filled(ticks, size)
    now = (ticks[-1][0] if ticks else 0.0) + after
    below = w.count_beyond(now, seconds, tuple(-x for x in levels), above=False)
    above = w.count_beyond(now, seconds, tuple(levels), above=True)
    assert below == [w.buckets_below(now, seconds, x) for x in levels]
    assert above == [w.buckets_above(now, seconds, x) for x in levels]
    highs = w.bucket_extremes(now, seconds, above=False)
    assert below == [sum(1 for x in highs if x < -level) for level in levels]


@settings(max_examples=100, deadline=None)
@given(ticks=ticks_strategy, split=st.floats(0, 1), after=st.integers(0, 90))
def test_a_restored_ring_reads_the_same(ticks: list[tuple[float, float]], split: float,
                                        after: int) -> None:
    """Nothing derived is kept beside the exported ring, so a restore needs no rebuild;
    this pins that down: the reads of a restored ring equal those of the one it came from."""
    cut = int(len(ticks) * split)
    a = filled(ticks[:cut], 61)
    b = Windows(BUCKET, 61, LOW_LINE, HIGH_LINE, TAU)
    b.load(a.export())
    for ts, dev in ticks[cut:]:
        a.add_price(ts, dev)
        b.add_price(ts, dev)
    now = (math.floor((ticks[-1][0] if ticks else 0.0) / BUCKET) + 1 + after) * BUCKET
    for seconds in (300, 900, 3600):
        assert same(a.fields(now, seconds, ALL_FIELDS), b.fields(now, seconds, ALL_FIELDS))
        assert a.count_beyond(now, seconds, (-0.01,), above=False) == \
            b.count_beyond(now, seconds, (-0.01,), above=False)


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(st.floats(0, 900, allow_nan=False), deviations,
                                st.lists(st.tuples(st.floats(0, 4000, allow_nan=False),
                                                   st.sampled_from([900, 3600, 300])),
                                         max_size=3)),
                      min_size=1, max_size=150),
       size=st.sampled_from([61, 7]))
def test_counts_stay_equal_as_ticks_and_refreshes_interleave(
        steps: list[tuple[float, float, list[tuple[float, int]]]], size: int) -> None:
    """The flags kept between refreshes (final buckets are worked out once) never go
    stale: ticks and reads interleave as in the engine, reads at any time after the last
    tick (also backwards, and for different window lengths on the same lines)."""
    w = Windows(BUCKET, size, LOW_LINE, HIGH_LINE, TAU)
    ts = 0.0
    lines = (-0.05, -0.02, -0.01)
    for gap, dev, reads in steps:
        ts += gap
        w.add_price(ts, dev)
        for after, seconds in reads:
            now = ts + after
            assert w.count_beyond(now, seconds, lines, above=False) == \
                [w.buckets_below(now, seconds, -x) for x in lines]
            assert w.count_beyond(now, seconds, (0.005,), above=True) == \
                [w.buckets_above(now, seconds, 0.005)]


# Runs of ticks below the lines and runs at or above them: the refresh skips summing a
# persistence column whose last time below the line is older than the window.
runs = st.lists(
    st.tuples(st.sampled_from([-0.02, -0.011, -0.007, -0.005, 0.0, 0.001, 0.004]),
              st.lists(st.floats(1, 400, allow_nan=False), min_size=1, max_size=25)),
    min_size=1, max_size=8)


BELOW = (-0.02, -0.006, -0.005, -0.0025)


@settings(max_examples=300, deadline=None)
@given(runs=runs, cut=st.integers(0, 200), size=st.sampled_from([61, 7]))
def test_persistence_reads_equal_the_plain_window_through_calm_runs_and_a_restore(
        runs: list[tuple[float, list[float]]], cut: int, size: int) -> None:
    """Seconds below the lines read after every tick, in windows that end in a calm run
    (all zeros: not summed) or reach back into a stressed one, equal ``window``'s, and so
    do those of a ring restored mid-way from an export (its derived marks worked out);
    the same for the counts of whole buckets below lines."""
    w = Windows(BUCKET, size, LOW_LINE, HIGH_LINE, TAU)
    restored: Windows | None = None
    ts, n = 0.0, 0
    for dev, gaps in runs:
        for gap in gaps:
            ts += gap
            n += 1
            w.add_price(ts, dev)
            if restored is not None:
                restored.add_price(ts, dev)
            elif n == cut:
                restored = Windows(BUCKET, size, LOW_LINE, HIGH_LINE, TAU)
                restored.load(w.export())
            for ring in (w, restored) if restored is not None else (w,):
                for seconds in (300, 900, 3600):
                    for now in (ts, ts + 30.0, (math.floor(ts / BUCKET) + 2) * BUCKET):
                        plain = w.window(now, float(seconds))
                        assert same(ring.fields(now, seconds, (LOW, HIGH, COV)),
                                    [plain[LOW], plain[HIGH], plain[COV]])
                        # Whole buckets below lines on both sides of the low line
                        # (those under it are not counted in a calm stretch).
                        assert ring.count_beyond(now, seconds, BELOW, above=False) == \
                            [w.buckets_below(now, seconds, -x) for x in BELOW]
