"""The broker stops answering for 20 s while ticks are being produced: the monitor reports
not-ready, keeps retrying, and recovers on its own without losing a transition.

The embedded broker is paused (SIGSTOP) rather than restarted: Tansu keeps everything in
memory, so a real restart would lose every topic, offset and state record.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaProducer

from monitor.config import Config
from monitor.daemon import MonitorDaemon
from monitor.kafka.embedded import EmbeddedBroker
from tests.conftest import data_file

from .kafkatools import (
    TopicReader,
    check_union,
    engine_outputs,
    fast_kafka,
    group_caught_up,
    load_ticks,
    tick_records,
    wait_for,
)

pytestmark = [pytest.mark.broker, pytest.mark.data]

PAUSE_SECONDS = 20


async def test_monitor_recovers_from_a_20s_broker_outage(broker: EmbeddedBroker) -> None:
    ticks = load_ticks(data_file("ticks/usdc_2023-03_binanceus_1m.csv"))
    expected, _ = engine_outputs(ticks)
    records = tick_records(ticks)
    config = Config(kafka=fast_kafka(broker.bootstrap_servers, batch_max_records=500))
    k = config.kafka
    stop = asyncio.Event()
    daemon = MonitorDaemon(config)
    task = asyncio.create_task(daemon.run(stop))
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all",
                                enable_idempotence=False, request_timeout_ms=120_000)
    await producer.start()
    try:
        await wait_for(lambda: _ready(daemon, True), 30, "monitor ready")
        head, tail = records[:10_000], records[10_000:]
        await _send(producer, k.ticks_topic, head)
        await wait_for(lambda: _processed(daemon, len(head)), 60, "the first ticks processed")

        async def keep_producing() -> None:  # the rest, spread over the outage
            for i in range(0, len(tail), 500):
                await _send(producer, k.ticks_topic, tail[i:i + 500])
                await asyncio.sleep(0.2)

        feeder = asyncio.create_task(keep_producing())
        broker.pause()
        paused_at = time.monotonic()
        try:
            await wait_for(lambda: _ready(daemon, False), PAUSE_SECONDS - 2,
                           "readiness to turn false while the broker is away")
            _, detail = await daemon.check()
            await asyncio.sleep(max(0.0, PAUSE_SECONDS - (time.monotonic() - paused_at)))
        finally:
            broker.resume()
        assert "broker" in detail or "stuck" in detail, detail
        await asyncio.wait_for(feeder, 120)
        await wait_for(lambda: _ready(daemon, True), 60, "readiness back after the outage")
        await wait_for(lambda: group_caught_up(broker.bootstrap_servers, k.monitor_group,
                                               k.ticks_topic), 120, "every tick committed")
        async with TopicReader(broker.bootstrap_servers, k.tier_changes_topic) as changes:
            await changes.poll(500)
            await changes.poll(500)
            check_union(changes.records, expected)
        assert not task.done(), "the daemon must still be running"
    finally:
        await producer.stop()
        stop.set()
        await asyncio.wait_for(task, 60)


async def _send(producer: AIOKafkaProducer, topic: str,
                records: list[tuple[bytes | None, bytes]]) -> None:
    futures = [await producer.send(topic, value, key=key) for key, value in records]
    await asyncio.gather(*futures)


async def _ready(daemon: MonitorDaemon, want: bool) -> bool:
    return (await daemon.check())[0] is want


async def _processed(daemon: MonitorDaemon, n: int) -> bool:
    return daemon.stats.ticks >= n
