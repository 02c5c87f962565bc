"""The real USDC March 2023 file through Kafka gives exactly the engine's transitions."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from monitor.config import Config
from monitor.daemon import MonitorDaemon
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics
from monitor.records import decode_event, decode_snapshot
from monitor.replay import run_replay
from monitor.testing import publish
from monitor.tickfiles import read_file
from tests.conftest import data_file

from .kafkatools import (
    TopicReader,
    engine_transitions,
    fast_kafka,
    group_caught_up,
    load_ticks,
    tick_records,
    wait_for,
)

pytestmark = [pytest.mark.broker, pytest.mark.data]


async def test_usdc_march_2023_matches_in_process_engine(broker: EmbeddedBroker) -> None:
    path = data_file("ticks/usdc_2023-03_binanceus_1m.csv")
    ticks = load_ticks(path)
    expected = engine_transitions(ticks)
    replayed, _, _ = run_replay(read_file(path), Config().model)
    # The replay command also flushes the lateness buffer at the end of the file; on this
    # file that adds nothing, so the live stream must give the replay's transitions exactly.
    assert [e.event_id for e in replayed] == [e.event_id for e in expected]
    assert len(expected) >= 4, "the file holds the SVB depeg: several transitions expected"

    config = Config(kafka=fast_kafka(broker.bootstrap_servers))
    k = config.kafka
    records = tick_records(ticks)
    # Half the file is waiting in the topic before the monitor starts (its fetcher races
    # the partition assignment), the other half arrives while it runs.
    await ensure_topics(k)
    await publish(broker.bootstrap_servers, k.ticks_topic, records[:len(records) // 2])
    stop = asyncio.Event()
    daemon = MonitorDaemon(config)
    task = asyncio.create_task(daemon.run(stop))
    try:
        await wait_for(daemon_ready(daemon), 30, "monitor ready")
        await publish(broker.bootstrap_servers, k.ticks_topic, records[len(records) // 2:])
        async with TopicReader(broker.bootstrap_servers, k.tier_changes_topic) as reader:
            await reader.until(lambda recs: len(recs) >= len(expected), 60, "transitions")
            await wait_for(lambda: group_caught_up(broker.bootstrap_servers, k.monitor_group,
                                                   k.ticks_topic), 30, "offsets committed")
            await reader.poll(500)
            got = [decode_event(r.value) for r in reader.records]
        assert [e.event_id for e in got] == [e.event_id for e in expected]
        assert got == expected  # the whole object, field for field
        assert all(r.key == b"eth:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
                   for r in reader.records)
        async with TopicReader(broker.bootstrap_servers, k.ratings_topic) as ratings:
            await ratings.poll(1000)
            snap = decode_snapshot(ratings.records[0].value)
            assert snap.symbol == "USDC"
        assert daemon.stats.ticks == len(ticks)
        assert daemon.stats.dead_letters == 0
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def daemon_ready(daemon: MonitorDaemon) -> Callable[[], Awaitable[bool]]:
    async def ready() -> bool:
        ok, _ = await daemon.check()
        return ok
    return ready
