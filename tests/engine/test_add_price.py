"""``Windows.add_price`` holds the previous price inline (it called ``_hold`` per tick);
the ring it leaves must be the very one the separate steps left, bit for bit, on any tick
stream. The reference below is the code as it was (``_hold``, then the tick's own slot).
Compared by ``repr`` so -0.0 and 0.0 differ.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.engine import windows as windows_module
from monitor.engine.readings import NEVER
from monitor.engine.readplan import make_plan, read_plan
from monitor.engine.ringroll import add_general
from monitor.engine.windows import Windows

BUCKET = 60
LOW_LINE, HIGH_LINE, TAU = 0.005, 0.01, 21600.0


def reference_hold(w: Windows, dev: float, start: float, end: float) -> None:
    horizon = end - w.size * w.bucket
    if start < horizon:
        start = horizon
    if end <= start:
        return
    f = w._f
    below_low = dev < -w.low
    below_high = dev < -w.high
    t = start
    b = NEVER
    while t < end:
        b = int(t // w.bucket)
        stop = min((b + 1) * w.bucket, end)
        dt = stop - t
        head = w.head
        slot = b % w.size if head is not None and b <= head else w._slot(b)
        f[0][slot] += dev * dt
        f[1][slot] += dt
        if below_low:
            f[2][slot] += dt
            if below_high:
                f[3][slot] += dt
        f[6][slot] = min(f[6][slot], dev)
        f[7][slot] = max(f[7][slot], dev)
        t = stop
    if below_low and b > w.low_b:
        w.low_b = b
    if below_high and b > w.high_b:
        w.high_b = b


def reference_add_price(w: Windows, ts: float, dev: float) -> None:
    last_dev = w.last_dev
    if last_dev is not None and w.last_price_ts is not None:
        if ts < w.last_price_ts:
            w._flags.clear()
        reference_hold(w, last_dev, w.last_price_ts, ts)
    b = int(ts // w.bucket)
    head = w.head
    slot = b % w.size if head is not None and b <= head else w._slot(b)
    f = w._f
    if last_dev is not None:
        change = dev - last_dev
        r2 = change * change
        f[4][slot] += r2
        if w.base_ts is not None:
            w.base_s *= math.exp(-(ts - w.base_ts) / w.base_tau)
        w.base_s += r2
    w.base_ts = ts
    f[5][slot] += 1.0
    if dev < f[6][slot]:
        f[6][slot] = dev
    if dev > f[7][slot]:
        f[7][slot] = dev
    w.last_price_ts = ts
    w.last_dev = dev


def state(w: Windows) -> list[str]:
    w.sync()  # the open bucket's fields into the ring (they are added up apart)
    return [repr(x) for x in (w._f, w.head, w.low_b, w.high_b, w.last_price_ts, w.last_dev,
                              w.base_s, w.base_ts)]


# Gaps that stay inside a bucket, end exactly on a boundary, open the next bucket, skip
# several, wrap the whole ring; sometimes backwards (a caller other than the engine).
gaps = st.one_of(
    st.floats(0, 90, allow_nan=False), st.sampled_from([0.0, 1.0, 20.0, 40.0, 60.0, 120.0]),
    st.floats(90, 8000, allow_nan=False), st.floats(-120, 0, allow_nan=False),
)
deviations = st.one_of(
    st.floats(-0.2, 0.05, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, -0.005, -0.0075, -0.01, -0.02, 0.005]),
)


def _assert_same_ring(start: float, steps: list[tuple[float, float]], size: int,
                      lines: tuple[float, float]) -> None:
    """Feed the same prices to ``add_price`` and to the reference general path; the ring
    and every mark must agree after each one."""
    fast = Windows(BUCKET, size, lines[0], lines[1], TAU)
    plain = Windows(BUCKET, size, lines[0], lines[1], TAU)
    ts = start
    for gap, dev in steps:
        ts += gap
        fast.add_price(ts, dev)
        reference_add_price(plain, ts, dev)
        assert state(fast) == state(plain)


@settings(max_examples=400, deadline=None)
@given(start=st.one_of(st.floats(0, 120, allow_nan=False),
                       st.sampled_from([1_700_000_000.0, 1_700_000_020.5, -90.0])),
       steps=st.lists(st.tuples(gaps, deviations), max_size=200),
       size=st.sampled_from([61, 7, 2]),
       lines=st.sampled_from([(LOW_LINE, HIGH_LINE), (0.01, 0.005)]))
def test_add_price_leaves_the_ring_of_the_general_path(
        start: float, steps: list[tuple[float, float]], size: int,
        lines: tuple[float, float]) -> None:
    _assert_same_ring(start, steps, size, lines)


# Gaps of about one bucket, from starts on and off the boundaries: nearly every price lies
# in the bucket after the held one's, on its start or past it (a one-minute feed, a
# replay's 1m files), which ``add_price`` writes without rolling the ring through
# ``_slot`` (``_next_bucket``, docs/performance.md twelfth pass). A ring of one bucket
# too: there the new bucket's slot is the held one's.
about_one_bucket = st.one_of(
    st.sampled_from([60.0, 60.0, 59.0, 61.0, 1.0, 119.0, 120.0, 180.0]),
    st.floats(30, 125, allow_nan=False),
)


@settings(max_examples=400, deadline=None)
@given(start=st.sampled_from([0.0, 59.0, 1_700_000_040.0, 1_700_000_020.5]),
       steps=st.lists(st.tuples(about_one_bucket, deviations), max_size=150),
       size=st.sampled_from([61, 7, 2, 1]),
       lines=st.sampled_from([(LOW_LINE, HIGH_LINE), (0.01, 0.005)]))
def test_add_price_into_the_next_bucket_leaves_the_ring_of_the_general_path(
        start: float, steps: list[tuple[float, float]], size: int,
        lines: tuple[float, float]) -> None:
    _assert_same_ring(start, steps, size, lines)


@pytest.mark.skipif(str(windows_module.__file__).endswith(".so"),
                    reason="counts calls by patching a module global, which a compiled "
                           "add_price does not look up (the ring checks above still run)")
def test_a_one_minute_feed_takes_the_next_bucket_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream above is not all general path in disguise: a feed on the minute (every
    tick on its bucket's start) and one off it both take ``add_price``'s next-bucket path
    (one tick a bucket: never the in-bucket one), so only the first price is general."""
    calls: list[float] = []

    def counted(w: Windows, ts: float, *args: float | None) -> None:
        calls.append(ts)
        add_general(w, ts, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(windows_module, "add_general", counted)
    for start in (1_700_000_040.0, 1_700_000_020.5):
        fast = Windows(BUCKET, 61, LOW_LINE, HIGH_LINE, TAU)
        plain = Windows(BUCKET, 61, LOW_LINE, HIGH_LINE, TAU)
        calls.clear()
        for n in range(200):
            ts, dev = start + 60.0 * n, -0.001 * (n % 13)
            fast.add_price(ts, dev)
            reference_add_price(plain, ts, dev)
            assert state(fast) == state(plain)
        assert calls == [start]  # the first price only


@pytest.mark.parametrize("size", [61, 7, 2, 1])
@pytest.mark.parametrize("offset", [0.0, 20.5, 59.0])
def test_gaps_of_every_length_write_the_ring_of_the_general_path(size: int,
                                                                 offset: float) -> None:
    """A quiet feed's gaps, whole buckets written as slices (``ringroll._fill``, wrapping
    past the ring's end at every slot) and a gap longer than the ring cut to it (no
    emptying pass first): gaps of 1 to 2 rings and a half of buckets, on the boundary and
    off it, from every slot, below both lines, between them and above them."""
    gaps = [60.0 * k + extra for k in range(1, size * 5 // 2 + 2) for extra in (0.0, 7.25)]
    devs = [-0.02, -0.0075, 0.001, -0.0]
    steps = [(gap, devs[i % len(devs)]) for i, gap in enumerate(gaps)]
    _assert_same_ring(1_700_000_000.0 + offset, steps, size, (LOW_LINE, HIGH_LINE))


# Reads a refresh makes, at 1/min, 5/min, 15/min and 1 h, every field of each (minimums and
# maximums included), the way ``read_fields`` takes them.
_READS = ((60.0, (0, 1, 2, 3, 4, 5, 6, 7)), (300.0, (0, 1, 4, 6)),
          (900.0, (0, 1, 2, 3, 4, 5, 6, 7)), (3600.0, (0, 1, 2, 3, 5, 6, 7)))
_PLAN = make_plan(_READS)


@settings(max_examples=200, deadline=None)
@given(start=st.sampled_from([0.0, 59.0, 1_700_000_040.0, 1_700_000_020.5]),
       steps=st.lists(st.tuples(st.sampled_from([0.25, 1.0, 7.0, 60.0, 61.5, 200.0]),
                                st.floats(-0.03, 0.01, allow_nan=False)),
                      min_size=1, max_size=150))
def test_every_reader_sees_the_open_bucket_added_up_apart(
        start: float, steps: list[tuple[float, float]]) -> None:
    """Ticks inside one bucket are added up outside the ring (``Windows.sync``): each
    reader must see them as the ring of the general path holds them, read at once after
    the tick (no ``sync`` by the test first), and at the next bucket boundary."""
    fast = Windows(BUCKET, 61, LOW_LINE, HIGH_LINE, TAU)
    plain = Windows(BUCKET, 61, LOW_LINE, HIGH_LINE, TAU)
    ts = start
    for gap, dev in steps:
        ts += gap
        fast.add_price(ts, dev)
        reference_add_price(plain, ts, dev)
        for now in (ts, (math.floor(ts / BUCKET) + 1) * BUCKET):
            assert repr(fast.reads(now, _READS)) == repr(plain.reads(now, _READS))
            assert repr(read_plan(fast, now, _PLAN)) == repr(read_plan(plain, now, _PLAN))
            assert repr(fast.window(now, 900.0)) == repr(plain.window(now, 900.0))
            for above in (False, True):
                assert fast.bucket_extremes(now, 3600.0, above=above) \
                    == plain.bucket_extremes(now, 3600.0, above=above)
                lines = (0.005, 0.01, 0.02)
                assert fast.count_beyond(now, 3600.0, lines, above=above) \
                    == plain.count_beyond(now, 3600.0, lines, above=above)
        assert repr(fast.export()) == repr(plain.export())
