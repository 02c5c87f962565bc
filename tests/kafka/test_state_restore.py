"""State restore reads the state topic to its TRUE end, on the embedded broker.

Tansu answers ``end_offsets`` with the start of a partition's last record batch plus one;
a restore that stops there loses the newest checkpoints of every token in that batch except
the first. These tests write many checkpoints in large batches and compare what is restored
with an independent truth: what was written (first test) and what an engine fed the same
ticks holds (second test: the daemon's own checkpoints after a clean stop).
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from monitor.config import Config
from monitor.daemon import MonitorDaemon
from monitor.daemon.state import STATE_VERSION, StateRecord, encode_state, read_states
from monitor.engine import Engine
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.readall import true_end_offsets
from monitor.kafka.topics import ensure_topics, make_reader
from monitor.testing import publish
from producers.synthetic import generate, make_tokens

from .kafkatools import (
    fast_kafka,
    group_caught_up,
    partition_of,
    tick_records,
    wait_for,
)

pytestmark = [pytest.mark.broker]


async def test_restore_returns_the_newest_checkpoint_of_every_token(broker: EmbeddedBroker) -> None:
    kafka = fast_kafka(broker.bootstrap_servers, partitions=2)
    await ensure_topics(kafka)
    keys = [f"eth:0x{i:040x}" for i in range(60)]
    newest: dict[str, StateRecord] = {}
    # One big batch per checkpoint: a long linger and room for every record of it.
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all",
                                enable_idempotence=False, linger_ms=200,
                                max_batch_size=1024 * 1024)
    await producer.start()
    try:
        for checkpoint in range(25):
            futures = []
            for i, key in enumerate(keys):
                p = i % 2
                record = StateRecord(version=STATE_VERSION, key=key, partition=p,
                                     offset=checkpoint * 1000 + i, last_event_ts=None,
                                     written_at=float(checkpoint), stale=False,
                                     engine_state=b"s%d" % checkpoint)
                newest[key] = record
                futures.append(await producer.send(kafka.state_topic, encode_state(record),
                                                   key=key.encode(), partition=p))
            await asyncio.gather(*futures)
    finally:
        await producer.stop()

    def reader() -> AIOKafkaConsumer:
        return make_reader(kafka, "test-state-reader")

    restored = await read_states(reader, kafka.state_topic, [0, 1])
    got = {key: rec for part in restored.values() for key, rec in part.items()}
    assert got == newest

    # The tests' own end-of-partition helper must see every record too.
    probe = reader()
    await probe.start()
    try:
        tps = [TopicPartition(kafka.state_topic, p) for p in (0, 1)]
        ends = await true_end_offsets(probe, tps)
    finally:
        await probe.stop()
    assert sum(ends.values()) == 25 * len(keys)


async def test_daemon_checkpoints_restore_exactly_what_an_engine_holds(
        broker: EmbeddedBroker) -> None:
    """Many tokens, many checkpoints, a second instance joining (a rebalance), clean stops:
    the restored state of every token is byte-identical to an engine fed that token's
    ticks (the brute-force truth), and the first instance never re-reads the partitions it
    keeps across the rebalance."""
    tokens = make_tokens(60, seed=7)
    ticks = list(generate(tokens, seed=7, start=1_700_000_000.0, interval=60.0,
                          duration=4 * 3600.0))
    kafka = fast_kafka(broker.bootstrap_servers, partitions=3, batch_max_records=400,
                       checkpoint_interval_seconds=0.05, linger_ms=50)
    config = Config(kafka=kafka)
    stop = asyncio.Event()
    first, second = MonitorDaemon(config), MonitorDaemon(config, check_name="monitor-2")
    tasks = [asyncio.create_task(first.run(stop))]
    try:
        await asyncio.wait_for(first.joined.wait(), 60)
        await publish(broker.bootstrap_servers, kafka.ticks_topic, tick_records(ticks))
        await wait_for(lambda: group_caught_up(broker.bootstrap_servers, kafka.monitor_group,
                                               kafka.ticks_topic), 180, "every tick committed")
        assert first.stats.restored_tokens == 0  # started on an empty state topic
        tasks.append(asyncio.create_task(second.run(stop)))
        await asyncio.wait_for(second.joined.wait(), 60)
        assert second.stats.restored_tokens > 0, "the joiner starts from the handed-over state"
        assert first.stats.restored_tokens == 0, "kept partitions must not be restored again"
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
    assert first.stats.checkpoints >= 10, "the test needs many checkpoints"

    truth = Engine(config.model)
    for tick in ticks:
        truth.process(tick)

    def reader() -> AIOKafkaConsumer:
        return make_reader(kafka, "test-state-reader")

    restored = await read_states(reader, kafka.state_topic, list(range(3)))
    assert sum(len(v) for v in restored.values()) == len(tokens)
    wrong = []
    for key in truth.keys():
        state = restored[partition_of(key, 3)].get(key)
        # A compact state leaves the ticks held for lateness out and lists their offsets.
        if state is None or state.engine_state != truth.export_state(
                key, pending=not state.pending_offsets) or (
                state.pending_offsets
                and len(state.pending_offsets) != len(truth.pending(key))):
            wrong.append(key)
    assert not wrong, f"{len(wrong)} of {len(tokens)} tokens restored with an older state"
