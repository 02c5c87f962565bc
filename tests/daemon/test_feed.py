"""The daemon's per-tick loop (``monitor.daemon.feed.Feed``) on one partition's records:
every way a record is refused, in order and with its reason, and the outputs of the rest.

The truth is independent of the loop: an engine fed the valid ticks directly (its outputs
byte for byte), the rules themselves (the record key is ``chain:token`` of its tick; a
tick dated past the wall clock plus the tolerance is refused; one older than the
reordering window is late, a spread copy silently), and the live clock's newest time per
token. ``summary`` is also what tests/test_compiled_build.py compares between the sources
and the compiled build (the module is in its ``MODULES``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from monitor.config import ModelConfig
from monitor.daemon.clock import LiveClock
from monitor.daemon.feed import Feed
from monitor.daemon.partitions import PartitionState
from monitor.engine import Engine, Output
from monitor.kafka.fetched import FetchedRecord
from monitor.records import encode
from monitor.ticks import BadTick, Tick, decode_tick, encode_tick, make_tick

T0 = 1_700_000_000
#: The wall clock of the feed: a tick dated past WALL + the tolerance is refused.
WALL = float(T0 + 100_000)
TOKENS = [("eth", "0x" + f"{i:x}" * 40) for i in range(1, 4)]
KEYS = [f"{chain}:{address}" for chain, address in TOKENS]


def tick_of(n: int, token: int, ts: float, spread: bool = False) -> Tick:
    chain, address = TOKENS[token]
    if spread:
        return make_tick(ts, chain, address, "", source="spread",
                         cross_chain_spread_bps=12.5, cross_chain_chains=3)
    return make_tick(ts, chain, address, f"TOK{token}",
                     f"{0.999 - (n % 37) * 3e-4:.6f}", "1")


def records() -> tuple[list[FetchedRecord], dict[int, str]]:
    """One partition's records (offsets 0..) with bad ones among them, and the reason
    each bad one must be refused for, by offset."""
    recs: list[FetchedRecord] = []
    bad: dict[int, str] = {}

    def add(value: bytes, key: bytes, reason: str | None = None) -> None:
        if reason is not None:
            bad[len(recs)] = reason
        recs.append(FetchedRecord("depeg.ticks", 0, len(recs), 0, 0, key, value, ()))

    for n in range(2_400):
        token = n % 3
        tick = tick_of(n, token, T0 + 30 * (n // 3))
        key = tick.key.encode()
        if n % 211 == 5:
            add(b"{not json", key, "bad_json")
        elif n % 211 == 17:
            add(encode_tick(tick), b"eth:0x" + b"e" * 40,
                "bad_key")
        elif n % 211 == 29:  # dated well past the wall clock's tolerance
            add(encode_tick(tick_of(n, token, WALL + 10_000)), key, "future_ts")
        elif n % 211 == 41 and n > 300:  # far older than the reordering window
            add(encode_tick(tick_of(n, token, T0 + 30 * (n // 3) - 3_600)), key, "late")
        elif n % 211 == 53 and n > 300:  # a late spread copy: dropped without a word
            add(encode_tick(tick_of(n, token, T0 + 30 * (n // 3) - 3_600, spread=True)),
                key)
        add(encode_tick(tick), key)
    return recs, bad


def fed(batch: int) -> tuple[list[Output], list[tuple[int, str, str]], PartitionState,
                             LiveClock]:
    """The records through a fresh partition's engine in batches of ``batch``."""
    model = ModelConfig()
    part = PartitionState.restore(0, model, 0, {})
    clock = LiveClock(60.0, now=lambda: 0.0)
    produced: list[Output] = []
    refused: list[tuple[Any, BadTick]] = []
    recs, _ = records()
    for start in range(0, len(recs), batch):
        feed = Feed(clock, WALL, float(model.future_tolerance_seconds), 0.0,
                    lambda key, tick: f"{key} at {tick.ts} behind {clock.last_event_ts(key)}")
        feed.run(part, recs[start:start + batch], 0, produced, refused)
        assert feed.skipped == 0
    return produced, [(r.offset, e.reason, e.detail) for r, e in refused], part, clock


def summary(batch: int = 500) -> str:
    """What the loop produced, refused, counted and told the clock, as one JSON line."""
    produced, refused, part, clock = fed(batch)
    return json.dumps({
        "outputs": hashlib.sha256(b"".join(encode(o) + b"\n" for o in produced)).hexdigest(),
        "count": len(produced),
        "refused": refused,
        "uncovered": sorted(part.uncovered.count.items()),
        "first": sorted(part.uncovered.first_offset.items()),
        "clock": [(k, clock.last_event_ts(k)) for k in KEYS],
    })


def test_refused_records_and_outputs_match_the_rules_and_a_direct_engine() -> None:
    recs, bad = records()
    produced, refused, part, clock = fed(500)
    assert [(offset, reason) for offset, reason, _ in refused] == sorted(bad.items())
    # The late tick's detail is the daemon's (here: the test's) description of it.
    assert all(detail.startswith("eth:0x") for _, reason, detail in refused
               if reason == "late")
    # The truth: an engine fed every record that is not refused, directly, in order.
    truth = Engine(ModelConfig())
    expected: list[bytes] = []
    newest: dict[str, float] = {}
    taken: dict[str, int] = {}
    for rec in recs:
        if rec.offset in bad:
            continue
        tick = decode_tick(rec.value)
        expected += [encode(o) for o in truth.process(tick)]
        if tick.cross_chain_chains is None:
            newest[tick.key] = max(newest.get(tick.key, -1.0), tick.ts)
            taken[tick.key] = taken.get(tick.key, 0) + 1
    assert expected and [encode(o) for o in produced] == expected
    # The live clock knows each token's newest price tick; the partition counts every
    # tick taken since the token's written state (none is written here).
    assert {k: clock.last_event_ts(k) for k in newest} == newest
    assert part.uncovered.count == taken


def test_batch_boundaries_change_nothing() -> None:
    """One record per batch, uneven batches and one batch give the same result."""
    assert summary(1) == summary(333) == summary(10_000)
