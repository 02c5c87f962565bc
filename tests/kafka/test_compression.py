"""``kafka.compression`` reaches the broker, and consumers still read replay's exact bytes.

The codec is read from the record batch headers the broker serves (raw Fetch requests),
not from the producer's settings; the records are compared with an in-process replay of
the same ticks, byte for byte.
"""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest

from monitor.config import Config
from monitor.daemon import MonitorDaemon
from monitor.kafka.batches import stored_batches
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics
from monitor.records import encode
from monitor.replay import run_replay
from monitor.testing import publish
from monitor.ticks import Tick, make_tick

from .kafkatools import TopicReader, fast_kafka, group_caught_up, tick_records, wait_for

pytestmark = pytest.mark.broker

#: ``kafka.compression``'s values.
Codec = Literal["zstd", "lz4", "snappy", "gzip", "none"]


def synthetic_ticks(tokens: int = 6, minutes: int = 90) -> list[Tick]:
    """A few tokens, one of them sliding off its peg, one tick a minute."""
    ticks = []
    for step in range(minutes):
        for n in range(tokens):
            price = 1 - (0.0015 * max(0, step - 30) if n == 0 else 0.0001 * ((step + n) % 5))
            ticks.append(make_tick(1_700_000_000 + 60 * step, "eth", f"0x{n + 1:040x}",
                                   f"T{n}", f"{price:.6f}", "1"))
    return ticks


@pytest.mark.parametrize("codec", ["zstd", "lz4", "none"])
async def test_outputs_are_compressed_as_configured_and_equal_replay(
        broker: EmbeddedBroker, codec: Codec) -> None:
    ticks = synthetic_ticks()
    config = Config(kafka=fast_kafka(broker.bootstrap_servers, compression=codec,
                                     ticks_topic=f"ticks-{codec}",
                                     ratings_topic=f"ratings-{codec}",
                                     tier_changes_topic=f"changes-{codec}",
                                     dlq_topic=f"dlq-{codec}", state_topic=f"state-{codec}",
                                     monitor_group=f"monitor-{codec}"))
    k = config.kafka
    events, snapshots, _ = run_replay(iter(ticks), config.model, now=1_700_000_000 + 90 * 60)
    assert events, "the sliding token must change tier"
    await ensure_topics(k)
    await publish(broker.bootstrap_servers, k.ticks_topic, tick_records(ticks))
    stop = asyncio.Event()
    task = asyncio.create_task(MonitorDaemon(config).run(stop))
    try:
        await wait_for(lambda: group_caught_up(broker.bootstrap_servers, k.monitor_group,
                                               k.ticks_topic), 60, "offsets committed")
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)

    async with TopicReader(broker.bootstrap_servers, k.ratings_topic) as reader:
        await reader.until(lambda recs: len(recs) >= len(snapshots), 30, "rating snapshots")
        ratings = sorted(r.value for r in reader.records)
    async with TopicReader(broker.bootstrap_servers, k.tier_changes_topic) as reader:
        await reader.until(lambda recs: len(recs) >= len(events), 30, "tier changes")
        changes = sorted(r.value for r in reader.records)
    assert ratings == sorted(encode(s) for s in snapshots)
    assert changes == sorted(encode(e) for e in events)

    for topic, count in [(k.ratings_topic, len(snapshots)), (k.tier_changes_topic, len(events))]:
        tally = await stored_batches(broker.bootstrap_servers, topic)
        assert tally.records == count
        assert tally.codecs == {codec}, f"{topic}: batches stored as {sorted(tally.codecs)}"
    state = await stored_batches(broker.bootstrap_servers, k.state_topic)
    assert state.records >= 6 and state.codecs == {codec}
