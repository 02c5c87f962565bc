"""The bucketed windows agree with a naive recomputation from the raw ticks."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.engine.windows import Windows

BUCKET = 60
SIZE = 60
LOW, HIGH, TAU = 0.005, 0.01, 21600.0


def naive(ticks: list[tuple[float, float]], now: float, seconds: float) -> dict[str, float]:
    """Integrate the step function dev(t) over [now - seconds, now) tick by tick."""
    start = now - seconds
    out = {"dev_dt": 0.0, "covered": 0.0, "low_s": 0.0, "high_s": 0.0, "r2": 0.0}
    for i, (ts, dev) in enumerate(ticks):
        end = ticks[i + 1][0] if i + 1 < len(ticks) else now
        lo, hi = max(ts, start), min(end, now)
        if hi > lo:
            out["dev_dt"] += dev * (hi - lo)
            out["covered"] += hi - lo
            if dev < -LOW:
                out["low_s"] += hi - lo
            if dev < -HIGH:
                out["high_s"] += hi - lo
        if i > 0 and start <= ts < now:
            out["r2"] += (dev - ticks[i - 1][1]) ** 2
    return out


def naive_baseline(ticks: list[tuple[float, float]], now: float) -> float:
    s = sum((d - ticks[i - 1][1]) ** 2 * math.exp(-(now - t) / TAU)
            for i, (t, d) in enumerate(ticks) if i > 0)
    return s / TAU


ticks_strategy = st.lists(
    st.tuples(st.integers(0, 4 * 3600), st.floats(-0.2, 0.05, allow_nan=False)),
    min_size=1, max_size=200,
).map(lambda xs: sorted(((float(t), d) for t, d in xs), key=lambda x: x[0]))


@settings(max_examples=200, deadline=None)
@given(ticks=ticks_strategy, extra_buckets=st.integers(0, 90),
       seconds=st.sampled_from([60, 300, 900, 3600]))
def test_windows_match_naive_recomputation(
    ticks: list[tuple[float, float]], extra_buckets: int, seconds: int
) -> None:
    w = Windows(BUCKET, SIZE, LOW, HIGH, TAU)
    for ts, dev in ticks:
        w.add_price(ts, dev)
    now = (math.floor(ticks[-1][0] / BUCKET) + 1 + extra_buckets) * BUCKET
    dev_dt, covered, low_s, high_s, r2, *_ = w.window(now, seconds)
    expected = naive(ticks, now, seconds)
    got = {"dev_dt": dev_dt, "covered": covered, "low_s": low_s, "high_s": high_s, "r2": r2}
    for name, value in expected.items():
        assert math.isclose(got[name], value, rel_tol=1e-9, abs_tol=1e-7), (name, got, expected)
    assert math.isclose(w.baseline_rate(now), naive_baseline(ticks, now), rel_tol=1e-9,
                        abs_tol=1e-15)


@settings(max_examples=50, deadline=None)
@given(ticks=ticks_strategy)
def test_export_and_load_round_trip(ticks: list[tuple[float, float]]) -> None:
    a = Windows(BUCKET, SIZE, LOW, HIGH, TAU)
    half = len(ticks) // 2
    for ts, dev in ticks[:half]:
        a.add_price(ts, dev)
    b = Windows(BUCKET, SIZE, LOW, HIGH, TAU)
    b.load(a.export())
    for ts, dev in ticks[half:]:
        a.add_price(ts, dev)
        b.add_price(ts, dev)
    now = (math.floor(ticks[-1][0] / BUCKET) + 1) * BUCKET
    assert a.window(now, 3600) == b.window(now, 3600)


def test_memory_is_bounded_by_the_ring() -> None:
    w = Windows(BUCKET, SIZE, LOW, HIGH, TAU)
    for i in range(100_000):
        w.add_price(float(i * 7), -0.001 * (i % 5))
    assert all(len(f) == SIZE for f in w._f)


def test_a_smaller_saved_ring_loads_into_a_larger_one() -> None:
    ticks = [(float(60 * i + 5), -0.01 * (i % 3)) for i in range(90)]
    small, large, fresh = (Windows(BUCKET, SIZE, LOW, HIGH, TAU),
                           Windows(BUCKET, SIZE + 1, LOW, HIGH, TAU),
                           Windows(BUCKET, SIZE + 1, LOW, HIGH, TAU))
    for ts, dev in ticks:
        small.add_price(ts, dev)
        fresh.add_price(ts, dev)
    large.load(small.export())
    now = 60.0 * 91
    # Everything the smaller ring held is there (its windows reach 59 buckets back).
    assert large.window(now, 59 * 60) == fresh.window(now, 59 * 60)
