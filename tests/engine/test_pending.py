"""The lateness buffer (``Engine`` holds each token's ticks in time order, appending the
in-order ones and inserting a late one in place) releases ticks in (time, arrival) order.

The independent truth: the same ticks given to an engine already sorted by time, stably
(ties in arrival order), where the buffer never reorders anything. Any arrival order whose
ticks are each less than the lateness allowance behind the newest one seen gives the same
outputs, the same held ticks at every step (``pending``, in order) and the same saved state,
also after an export/restore in the middle. Ticks share times on purpose (ties are where
arrival order decides which price is held last).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import ModelConfig
from monitor.engine import Engine
from monitor.engine.tokenstate import TRIM_TAGS_OVER
from monitor.records import encode
from monitor.ticks import Tick, encode_tick, make_tick
from tests.engine.helpers import T0, USDC

KEY = f"eth:{USDC}"
LATENESS = 120

tick_parts = st.tuples(
    st.sampled_from([0, 0, 1, 30, 59, 60, 61, 300, 900]),      # gap to the previous tick
    st.integers(0, LATENESS - 1),                               # how late it arrives
    st.sampled_from(["1", "0.999", "0.995", "0.99", "0.97", "0.9", "1.006"]),
)
feeds = st.lists(tick_parts, min_size=1, max_size=60)
#: Dense and long: more than ``TRIM_TAGS_OVER`` ticks released between two refresh
#: boundaries, so the engine trims the tags of released ticks.
dense_feeds = st.lists(
    st.tuples(st.sampled_from([0, 1, 1, 2]), st.integers(0, LATENESS - 1),
              st.sampled_from(["1", "0.999", "0.99", "0.97"])),
    min_size=3 * TRIM_TAGS_OVER, max_size=6 * TRIM_TAGS_OVER,
)


def build(parts: list[tuple[int, int, str]]) -> tuple[list[Tick], list[Tick]]:
    """The ticks in time order (stable) and in arrival order (each delayed by < lateness)."""
    ts = T0
    timed = []
    for n, (gap, delay, price) in enumerate(parts):
        ts += gap
        timed.append((ts + delay, n, make_tick(ts, "eth", USDC, "USDC", price, "1")))
    arrival = [tick for _, _, tick in sorted(timed, key=lambda x: (x[0], x[1]))]
    in_time = sorted(arrival, key=lambda tick: tick.ts)  # stable: ties in arrival order
    return in_time, arrival


def run(ticks: list[Tick], cut: int | None = None) -> tuple[list[bytes], list[list[float]]]:
    """Outputs, and the held ticks' times after every tick (restored at ``cut``)."""
    engine = Engine(ModelConfig(lateness_seconds=LATENESS))
    out = []
    held = []
    for n, tick in enumerate(ticks):
        if n == cut:
            blob = engine.export_state(KEY)
            engine = Engine(ModelConfig(lateness_seconds=LATENESS))
            engine.restore_state(blob)
        out += engine.process(tick)
        held.append([t.ts for t in engine.pending(KEY)])
    assert engine.stats.late == 0
    out += engine.flush()
    return [encode(o) for o in out], held


@settings(max_examples=300, deadline=None)
@given(feeds, st.integers(0, 60))
def test_any_arrival_within_lateness_releases_in_time_order(
        parts: list[tuple[int, int, str]], cut: int) -> None:
    in_time, arrival = build(parts)
    truth, _ = run(in_time)
    out, held = run(arrival)
    assert out == truth
    assert run(arrival, 1 + cut % len(arrival))[0] == truth
    assert all(h == sorted(h) for h in held)  # the buffer is kept in time order


@settings(max_examples=200, deadline=None)
@given(feeds)
def test_saved_pending_ticks_are_in_time_then_arrival_order(
        parts: list[tuple[int, int, str]]) -> None:
    _, arrival = build(parts)
    engine = Engine(ModelConfig(lateness_seconds=LATENESS))
    for tick in arrival:
        engine.process(tick)
    held = engine.pending(KEY)
    # The held ticks, as given, in time order with ties in arrival order.
    positions = {id(tick): n for n, tick in enumerate(arrival)}
    assert [id(t) for t in held] == [
        id(t) for t in sorted(held, key=lambda t: (t.ts, positions[id(t)]))]
    again = Engine(ModelConfig(lateness_seconds=LATENESS))
    again.restore_state(engine.export_state(KEY))
    assert [encode_tick(t) for t in again.pending(KEY)] == [encode_tick(t) for t in held]


@settings(max_examples=300, deadline=None)
@given(feeds, st.integers(0, 60), st.sampled_from([300, 60, 0]))
def test_tags_stay_beside_their_ticks(parts: list[tuple[int, int, str]], cut: int,
                                      refresh_seconds: int) -> None:
    """``process``'s tag (the daemon's record offset) is kept beside its tick through
    in-place inserts, releases and refreshes (0: a refresh per tick): ``pending_tags``
    names exactly the held ticks, in ``pending`` order; ticks given no tag, and ticks
    restored with a saved state, have none (None)."""
    check_tags(parts, cut, refresh_seconds)


@settings(max_examples=25, deadline=None)
@given(dense_feeds, st.integers(0, 6 * TRIM_TAGS_OVER), st.sampled_from([300, 60]))
def test_tags_stay_beside_their_ticks_when_trimmed(
        parts: list[tuple[int, int, str]], cut: int, refresh_seconds: int) -> None:
    """The same, with more than ``TRIM_TAGS_OVER`` ticks released between two refresh
    boundaries: the engine forgets the released ticks' tags there, never a held one's."""
    check_tags(parts, cut, refresh_seconds)


def check_tags(parts: list[tuple[int, int, str]], cut: int, refresh_seconds: int) -> None:
    """Every step's held ticks against the tag each was given (or restored without)."""
    _, arrival = build(parts)
    config = ModelConfig(lateness_seconds=LATENESS, refresh_seconds=refresh_seconds)
    engine = Engine(config)
    arrived: dict[int, int | None] = {}  # id of a tick in ``arrival`` (all alive) -> tag
    restored: set[bytes] = set()  # the ticks held when the state was restored
    for n, tick in enumerate(arrival):
        if n == cut and n > 0:
            blob = engine.export_state(KEY)
            engine = Engine(config)
            engine.restore_state(blob)
            restored = {encode_tick(t) for t in engine.pending(KEY)}
        tag = None if n % 4 == 3 else 1000 + n  # offsets 0 and up; some ticks untagged
        engine.process(tick, None, tag)
        arrived[id(tick)] = tag
        held, tags = engine.pending(KEY), engine.pending_tags(KEY)
        assert len(tags) == len(held)
        for t, tag in zip(held, tags, strict=True):
            if id(t) in arrived:
                assert arrived[id(t)] == tag
            else:  # a tick decoded from the saved state: a new object, with no tag
                assert tag is None
                assert encode_tick(t) in restored
    engine.flush()
    assert engine.pending_tags(KEY) == []


@settings(max_examples=100, deadline=None)
@given(feeds, st.integers(0, 60))
def test_an_engine_that_keeps_no_tags_rates_the_same(
        parts: list[tuple[int, int, str]], cut: int) -> None:
    """``keep_tags=False`` (the replay's engine) names no tag for any held tick, before
    and after a restore, and its outputs are the tagging engine's."""
    _, arrival = build(parts)
    kept = Engine(ModelConfig(lateness_seconds=LATENESS))
    bare = Engine(ModelConfig(lateness_seconds=LATENESS), keep_tags=False)
    outs: tuple[list[bytes], list[bytes]] = ([], [])
    for n, tick in enumerate(arrival):
        if n == cut and n > 0:
            blob = bare.export_state(KEY)
            bare = Engine(ModelConfig(lateness_seconds=LATENESS), keep_tags=False)
            bare.restore_state(blob)
        outs[0].extend(encode(o) for o in kept.process(tick, None, n))
        outs[1].extend(encode(o) for o in bare.process(tick, None, n))
        assert bare.pending_tags(KEY) == [None] * len(bare.pending(KEY))
        assert len(kept.pending_tags(KEY)) == len(kept.pending(KEY))
    assert outs[0] == outs[1]
