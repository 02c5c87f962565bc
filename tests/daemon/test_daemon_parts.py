"""The daemon's pure parts: live clock, state records, restore marks, dead letters, backoff."""

from __future__ import annotations

from typing import cast

from monitor.config import ModelConfig
from monitor.daemon.clock import LiveClock
from monitor.daemon.deadletter import dead_letter
from monitor.daemon.outputs import OutputWriter
from monitor.daemon.partitions import PartitionState
from monitor.daemon.retry import Backoff
from monitor.daemon.state import STATE_VERSION, StateRecord, decode_state, encode_state
from monitor.engine import Engine
from monitor.records import encode
from monitor.ticks import Tick, make_tick

TOKEN = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
KEY = f"eth:{TOKEN}"


class FakeWall:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_live_clock_extrapolates_event_time_only_for_quiet_tokens() -> None:
    wall = FakeWall()
    clock = LiveClock(stale_after=900, now=wall)
    clock.tick(KEY, 1_678_000_000.0, partition=3)  # a 2023 tick, received now
    wall.now += 899
    assert clock.due() == []  # quiet, but not for long enough
    wall.now += 2
    assert clock.due() == [(KEY, 3, 1_678_000_000.0 + 901)]
    assert clock.is_stale(KEY)
    clock.tick(KEY, 1_677_999_990.0, partition=3)  # a late tick: newest event time kept
    assert clock.last_event_ts(KEY) == 1_678_000_000.0
    assert clock.due() == [] and not clock.is_stale(KEY)
    clock.forget([KEY])
    assert len(clock) == 0


def test_restore_marks_skip_only_ticks_inside_the_state() -> None:
    engine = Engine(ModelConfig())
    for i in range(10):
        engine.process(make_tick(1_678_000_000 + 60 * i, "eth", TOKEN, "USDC", "0.99", "1"))
    state = StateRecord(version=STATE_VERSION, key=KEY, partition=2, offset=120,
                        last_event_ts=1_678_000_540.0, written_at=0.0, stale=False,
                        engine_state=engine.export_state(KEY))
    assert decode_state(encode_state(state)) == state
    # Committed offset 100 < the state's 120: this token's ticks 100..119 are in the state.
    part = PartitionState.restore(2, ModelConfig(), 100, {KEY: state})
    assert part.next_offset == 100
    assert part.engine.tier_of(KEY) == engine.tier_of(KEY)
    assert part.should_skip(KEY, 110)
    assert not part.should_skip(KEY, 120)
    assert not part.should_skip(KEY, 115)  # the mark is gone once passed
    assert not part.should_skip("eth:0x" + "1" * 40, 0)
    # A state at or below the committed offset needs no mark.
    assert PartitionState.restore(2, ModelConfig(), 120, {KEY: state}).skip_below == {}


def test_state_records_of_version_1_still_load_and_version_2_is_deflated() -> None:
    """The wire format changed (engine state deflated); a state topic written by the old
    daemon must still restore every token exactly."""
    import msgspec

    engine = Engine(ModelConfig())
    for i in range(600):  # one tick a second: a full lateness buffer
        engine.process(make_tick(1_678_000_000 + i, "eth", TOKEN, "USDC",
                                 f"{0.99 - i * 1e-5:.6f}", "1"))
    blob = engine.export_state(KEY)
    record = StateRecord(version=STATE_VERSION, key=KEY, partition=2, offset=600,
                         last_event_ts=1_678_000_599.0, written_at=0.0, stale=False,
                         engine_state=blob)
    old_wire = msgspec.msgpack.encode(msgspec.structs.replace(record, version=1))
    new_wire = encode_state(record)
    assert decode_state(old_wire).engine_state == blob
    assert decode_state(new_wire).engine_state == blob
    assert len(new_wire) * 4 < len(old_wire)
    # The restored engines are the same engine: same state exported again.
    for wire in (old_wire, new_wire):
        part = PartitionState.restore(2, ModelConfig(), 600, {KEY: decode_state(wire)})
        assert part.engine.export_state(KEY) == blob


def _feed(part: PartitionState, ticks: list[Tick], upto: int) -> list[bytes]:
    """The ingest loop's per-record rules (monitor/daemon/ingest.py) over ticks at
    offsets ``part.next_offset .. upto - 1``; returns the outputs' bytes."""
    out: list[bytes] = []
    for offset in range(part.next_offset, upto):
        part.next_offset = offset + 1
        if part.inside_restored(offset):
            continue
        tick = ticks[offset]
        if part.should_skip(tick.key, offset):
            continue
        made = part.engine.process(tick, None, offset)  # the offset: the held tick's tag
        out += [encode(o) for o in made]
    return out


def _checkpoint(part: PartitionState, key: str) -> StateRecord:
    pending = part.pending_offsets(key)
    return decode_state(encode_state(StateRecord(
        version=STATE_VERSION, key=key, partition=0, offset=part.state_offset(key),
        last_event_ts=None, written_at=0.0, stale=False,
        engine_state=part.engine.export_state(key, pending=pending is None),
        pending_offsets=pending or [])))


def test_compact_states_leave_held_ticks_out_and_a_restore_reads_them_again() -> None:
    """A state written mid-stream (ticks held for lateness left out, their offsets in),
    restored at the committed offset: the engine that reads the partition on from the
    lowest held tick makes exactly the outputs, and ends in exactly the state, of one that
    never stopped; the record's size does not grow with tick density."""
    other = "eth:0x" + "2" * 40
    ticks: list[Tick] = []
    for i in range(3000):  # two tokens, one tick a second each, some out of order
        ts = 1_678_000_000 + i // 2 + (3 if i % 37 == 0 else 0)
        token = TOKEN if i % 2 == 0 else other.split(":")[1]
        ticks.append(make_tick(ts, "eth", token, "USDC", f"{0.99 - (i % 400) * 5e-5:.6f}",
                               "1"))
    truth = PartitionState.restore(0, ModelConfig(), 0, {})
    expected = _feed(truth, ticks, len(ticks))

    first = PartitionState.restore(0, ModelConfig(), 0, {})
    made = _feed(first, ticks, 1801)
    states = {key: _checkpoint(first, key) for key in (KEY, other)}
    assert all(s.pending_offsets for s in states.values())  # 120 s of ticks held
    made += _feed(first, ticks, 2000)  # published, then a crash before the next commit
    # Committed at 1801: outputs from there on are made again (same bytes).
    second = PartitionState.restore(0, ModelConfig(), 1801, states)
    assert second.next_offset == min(o for s in states.values() for o in s.pending_offsets)
    again = _feed(second, ticks, 1700)
    # A checkpoint while still reading below the committed offset (nothing is committed
    # then: the group's offset stays at 1801), and a crash: restored once more.
    states = {key: _checkpoint(second, key) for key in (KEY, other)}
    assert all(s.offset == 1801 for s in states.values())
    third = PartitionState.restore(0, ModelConfig(), 1801, states)
    again += _feed(third, ticks, len(ticks))
    assert set(made) | set(again) == set(expected)
    assert again == expected[len(expected) - len(again):]
    for key in (KEY, other):
        assert third.engine.export_state(key) == truth.engine.export_state(key)
    # Size: the same at one tick a second as at one a minute (no held ticks inside).
    assert len(encode_state(states[KEY])) < 2500


def test_dead_letter_keeps_a_bounded_prefix_and_says_why() -> None:
    value = b"x" * (10 * 1024 * 1024)
    dl = dead_letter(reason="too_large", detail="record is 10 MB", topic="depeg.ticks",
                     partition=1, offset=42, key=b"k" * 1000, value=value, prefix_bytes=1024)
    headers = dict(dl.headers)
    assert len(dl.value) == 1024 and dl.key is not None and len(dl.key) == 256
    assert headers["x-dlq-reason"] == b"too_large"
    assert headers["x-dlq-source-offset"] == b"42"
    assert headers["x-dlq-original-bytes"] == str(len(value)).encode()
    assert headers["x-dlq-truncated"] == b"true"


def test_backoff_grows_to_its_cap_and_resets() -> None:
    b = Backoff(0.5, 4.0)
    delays = [b.next_delay() for _ in range(8)]
    assert 0.4 <= delays[0] <= 0.6
    assert all(d <= 4.0 * 1.2 for d in delays) and delays[-1] >= 4.0 * 0.8
    b.reset()
    assert b.next_delay() <= 0.6


async def test_sweep_refreshes_a_token_quiet_for_one_refresh_interval() -> None:
    """Quiet for 5 minutes of wall time (not yet stale at 15): refreshed anyway, every
    refresh interval, up to its extrapolated event time."""
    from monitor.daemon.sweep import Sweeper
    from monitor.records import RatingSnapshot

    class Collect:  # stands in for the Kafka writer: the sweep only calls emit()
        def __init__(self) -> None:
            self.outputs: list[object] = []

        async def emit(self, outputs: list[object]) -> None:
            self.outputs += outputs

    model = ModelConfig()  # refresh 300 s, lateness 120 s, stale after 900 s
    wall = FakeWall()
    clock = LiveClock(model.stale_after_seconds, now=wall)
    part = PartitionState.restore(0, model, 0, {})
    last = 1_678_000_200.0  # a refresh boundary
    for i in range(30):
        tick = make_tick(last - 60 * (29 - i), "eth", TOKEN, "USDC", "0.97", "1")
        part.engine.process(tick)
        clock.tick(KEY, tick.ts, 0)
    sweeper, out = Sweeper(clock, model.refresh_seconds), Collect()
    times = []
    for _ in range(14):  # a sweep a minute for 14 minutes
        wall.now += 60
        # The stand-in has the one method the sweep uses (OutputWriter is a class, not a
        # protocol, so the checker is told).
        assert await sweeper.sweep({0: part}, cast(OutputWriter, out)) == 0  # never stale
        times += [o.timestamp for o in out.outputs if isinstance(o, RatingSnapshot)]
        out.outputs.clear()
    # Boundaries last + 300, + 600 are refreshed once the wall clock passes them plus the
    # lateness hold (7 and 12 minutes), not only after 15 minutes of silence.
    from monitor.timefmt import format_ts
    assert format_ts(last + 300) in times and format_ts(last + 600) in times


def test_held_offsets_stay_exact_when_released_ticks_are_freed() -> None:
    """The engine keeps each held tick's offset (its ``process`` tag) beside it, through
    out-of-order inserts and releases, while released ticks are freed (and their ids
    handed to later ticks). The offsets a checkpoint lists must be exactly those of the
    ticks the engine holds; the truth here is independent of the tags: each tick's price
    text carries its offset."""
    base = 1_678_000_000
    other = "0x" + "3" * 40
    part = PartitionState.restore(0, ModelConfig(), 0, {})
    checked = 0
    for offset in range(6000):
        # Two tokens interleaved; every 7th tick 30 s older than its neighbours (inside
        # the 120 s lateness window), so the held ticks are not a suffix of the offsets.
        ts = base + offset - (30 if offset % 7 == 0 else 0)
        token = TOKEN if offset % 3 else other
        # Only the engine keeps the tick; its price text says its offset.
        tick = make_tick(ts, "eth", token, "T", f"0.9{offset:05d}", "1")
        part.engine.process(tick, None, offset)
        del tick
        if offset % 997 == 996:  # a checkpoint now and then, as the daemon's
            for key in (KEY, f"eth:{other}"):
                truth = sorted(int((t.price_text or "")[3:]) for t in part.engine.pending(key))
                assert truth  # the engine holds 120 s of ticks
                assert part.pending_offsets(key) == truth
                checked += 1
    assert checked == 12
