"""The spread stage and the monitor on the real broker: byte-identical to the replay order.

USDC on three chains (tests/spread/multichain.py: real eth prices, arb trailing, base
going quiet) is published to depeg.ticks; the spread daemon and the monitor daemon run
side by side; every rating snapshot and tier change they publish must equal, byte for
byte, what the in-process stage + engine make. The spread daemon is stopped cleanly after
the first half, then a second one is killed without a checkpoint and a third restarts from
the first one's state, republishing spread ticks the monitor has already seen.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

from monitor.config import Config, RegistryConfig, SpreadConfig
from monitor.daemon import MonitorDaemon
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics
from monitor.records import RatingSnapshot, TierChangeEvent, encode
from monitor.spread.feed import SpreadFeed
from monitor.spread.service import SpreadDaemon
from monitor.testing import publish
from monitor.tickfiles import merge_by_time, read_file
from monitor.ticks import Tick, decode_tick
from tests.kafka.kafkatools import TopicReader, fast_kafka, tick_records, wait_for

from . import multichain

pytestmark = [pytest.mark.broker, pytest.mark.data]


async def test_daemons_publish_exactly_the_replay_order_outputs(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    registry, files = multichain.build(tmp_path, "2023-03-10T22", "2023-03-11T10")
    config = Config(kafka=fast_kafka(broker.bootstrap_servers),
                    registry=RegistryConfig(path=str(registry)))
    ticks = [r for r in merge_by_time(read_file(p) for p in files) if isinstance(r, Tick)]
    feed = SpreadFeed(config)
    expected = [o for t in ticks for o in feed.process(t)]  # no flush: a stream never ends
    events = [encode(o) for o in expected if isinstance(o, TierChangeEvent)]
    ratings = [encode(o) for o in expected if isinstance(o, RatingSnapshot)]
    assert len(events) >= 3
    assert {o.chain for o in expected if isinstance(o, RatingSnapshot)} == {"eth", "arb", "base"}
    assert feed.stage is not None
    spread_ticks = feed.stage.stats.published

    k = config.kafka
    await ensure_topics(k)
    records = tick_records(ticks)
    half = len(records) // 2
    await publish(broker.bootstrap_servers, k.ticks_topic, records[:half])
    stop = asyncio.Event()
    monitor = MonitorDaemon(config)
    monitor_task = asyncio.create_task(monitor.run(stop))
    # The stage checkpoints only when told to stop, so what a crash loses is known.
    rare = msgspec.structs.replace(config, kafka=msgspec.structs.replace(
        config.kafka, checkpoint_interval_seconds=3600.0))
    first_stop = asyncio.Event()
    first = SpreadDaemon(rare)
    spread_task = asyncio.create_task(first.run(first_stop))
    try:
        await wait_for(lambda: _published(first, 40), 60, "first spread observations")
        first_stop.set()  # clean stop: outputs acknowledged, state written
        await asyncio.wait_for(spread_task, 30)
        await publish(broker.bootstrap_servers, k.ticks_topic, records[half:])
        crashing = SpreadDaemon(rare)
        spread_task = asyncio.create_task(crashing.run(stop))
        async with TopicReader(broker.bootstrap_servers, k.ticks_topic) as before_crash:
            # Some of its observations are on the broker (so the restart must repeat them).
            await before_crash.until(
                lambda recs: len(_spread_keys(recs)) >= first.published + 20, 60,
                "the second stage's observations on the broker")
        spread_task.cancel()  # a crash: no checkpoint, the restart repeats its outputs
        await asyncio.gather(spread_task, return_exceptions=True)
        spread = SpreadDaemon(config)
        spread_task = asyncio.create_task(spread.run(stop))
        async with TopicReader(broker.bootstrap_servers, k.ticks_topic) as reader:
            # Every observation, and the copies the restart repeated (the second stage's
            # outputs on the broker are past the first one's state).
            await reader.until(lambda recs: len(_spread_keys(recs)) >= spread_ticks
                               and _spread_count(recs) > len(_spread_keys(recs)), 90,
                               "every spread observation and the repeated ones")
            published = [decode_tick(r.value) for r in reader.records]
        stage_out = [t for t in published if t.cross_chain_chains is not None]
        assert all(r.key == t.key.encode() for r, t in zip(reader.records, published,
                                                             strict=True))
        async with TopicReader(broker.bootstrap_servers, k.ratings_topic) as got_ratings:
            await got_ratings.until(lambda recs: len(recs) >= len(ratings), 90, "ratings")
            await got_ratings.poll(500)
        async with TopicReader(broker.bootstrap_servers, k.tier_changes_topic) as got_events:
            await got_events.until(lambda recs: len(recs) >= len(events), 60, "tier changes")
            await got_events.poll(500)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(monitor_task, spread_task,
                                              return_exceptions=True), 30)
    # The restart republished some observations (same bytes); every one is the replay's.
    assert len(stage_out) > len({(t.ts, t.key) for t in stage_out})
    assert {(t.ts, t.key, t.cross_chain_spread_bps, t.cross_chain_chains)
            for t in stage_out} == _expected_spreads(config, ticks)
    # The copies are dropped by the engine, never dead-lettered (they are expected).
    assert monitor.stats.dead_letters == 0
    by_key = sorted(r.value for r in got_ratings.records)
    assert by_key == sorted(ratings)
    assert sorted(r.value for r in got_events.records) == sorted(events)


async def _published(spread: SpreadDaemon, at_least: int) -> bool:
    return spread.published >= at_least


def _spread_count(records: list[Any]) -> int:
    return sum(decode_tick(r.value).cross_chain_chains is not None for r in records)


def _spread_keys(records: list[Any]) -> set[tuple[bytes, float]]:
    out: set[tuple[bytes, float]] = set()
    for r in records:
        tick = decode_tick(r.value)
        if tick.cross_chain_chains is not None:
            out.add((r.key, tick.ts))
    return out


def _expected_spreads(config: Config, ticks: list[Tick]
                      ) -> set[tuple[float, str, float | None, int | None]]:
    stage = SpreadFeed(config).stage
    assert stage is not None
    return {(t.ts, t.key, t.cross_chain_spread_bps, t.cross_chain_chains)
            for tick in ticks for t in stage.process(tick)}


async def test_without_the_stage_ratings_go_on_after_the_gate_timeout(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    """The spread stage is not running: gated tokens wait, then are rated without it (a
    missed alert costs more than a missing spread)."""
    registry, files = multichain.build(tmp_path, "2023-03-11T00", "2023-03-11T08")
    gated = Config(kafka=fast_kafka(broker.bootstrap_servers),
                   registry=RegistryConfig(path=str(registry)),
                   spread=SpreadConfig(gate_timeout_seconds=2.0))
    ticks = [r for r in merge_by_time(read_file(p) for p in files) if isinstance(r, Tick)]
    # What a monitor without any spread makes: the independent expectation.
    plain = SpreadFeed(Config(spread=SpreadConfig(enabled=False)))
    expected = [encode(o) for t in ticks for o in plain.process(t)
                if isinstance(o, TierChangeEvent)]
    assert len(expected) >= 3
    await ensure_topics(gated.kafka)
    await publish(broker.bootstrap_servers, gated.kafka.ticks_topic, tick_records(ticks))
    stop = asyncio.Event()
    monitor = MonitorDaemon(gated)
    task = asyncio.create_task(monitor.run(stop))
    try:
        async with TopicReader(broker.bootstrap_servers,
                               gated.kafka.tier_changes_topic) as reader:
            await reader.until(lambda recs: len(recs) >= len(expected), 60,
                               "tier changes after the gate timeout")
            await reader.poll(500)
        assert monitor._gates.opened == 3
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    assert sorted(r.value for r in reader.records) == sorted(expected)
