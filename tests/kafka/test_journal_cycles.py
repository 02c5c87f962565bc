"""The embedded broker's journal, cycle by cycle, on the real broker.

A cycle reads only the topics whose end offsets moved past what the journal holds
(``Journal._moved``: on Tansu ``end_offsets`` is the start of the last record batch plus
one). Checked against the topic itself, read to its true end: whatever batches arrive
between cycles (one record, many in one batch, a partition left alone), every record
the broker holds is journaled by the next cycle, once, and a cycle with nothing new
copies nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition

from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.journal import Journal
from monitor.kafka.readall import read_whole_topic
from monitor.kafka.topics import ensure_topics

from .kafkatools import fast_kafka

pytestmark = pytest.mark.broker


async def topic_rows(kafka: Any, topic: str, partitions: int) -> set[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record of ``topic``, read to its true end."""
    found: set[tuple[int, int, bytes]] = set()

    def keep(tp: TopicPartition, records: list[Any]) -> None:
        found.update((tp.partition, r.offset, r.value) for r in records)

    await read_whole_topic(kafka.bootstrap_servers, topic, partitions, keep)
    return found


async def test_each_cycle_journals_exactly_what_the_broker_holds(broker: EmbeddedBroker,
                                                                 tmp_path: Path) -> None:
    kafka = fast_kafka(broker.bootstrap_servers)
    await ensure_topics(kafka)
    topic, partitions = kafka.ticks_topic, kafka.partitions
    journal = Journal(kafka, tmp_path / "journal.sqlite", {kafka.monitor_group: [topic]})
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=50,
                                max_batch_size=1 << 20)
    await producer.start()
    try:
        sent = 0
        # (records, partitions they go to) between two cycles: nothing, one record,
        # a batch of many to one partition, a few to every partition, nothing again.
        for count, spread in [(0, 1), (1, 1), (40, 1), (3 * partitions, partitions), (0, 1)]:
            futures = [await producer.send(topic, f"r{sent + i}".encode(),
                                           partition=(sent + i) % spread)
                       for i in range(count)]
            await producer.flush()
            for future in futures:
                await future
            sent += count
            copied = await journal.cycle()
            assert copied == count
            held = {(p, off, value) for p in range(partitions)
                    for off, _, value, *_ in journal.store.all_records(topic, p)}
            assert held == await topic_rows(kafka, topic, partitions)
            assert len(held) == sent
        # The final cycle reads every topic whole: nothing new, nothing copied twice.
        assert await journal.cycle(whole=True) == 0
    finally:
        await producer.stop()
        await journal.aclose()


async def test_a_cycle_cancelled_anywhere_leaves_the_next_one_complete(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    """A stop that cannot wait for a cycle under way cancels it. A client kept although
    its start was cancelled had no broker to ask, so every later cycle, the final one
    too, failed ("Unable to update metadata from []") and the journal lost the run's
    last records. Cancelled at points swept through a cycle with new clients and one
    with kept clients, the next cycle still holds everything the broker holds."""
    kafka = fast_kafka(broker.bootstrap_servers, partitions=2)
    await ensure_topics(kafka)
    topic = kafka.ticks_topic
    journal = Journal(kafka, tmp_path / "journal.sqlite", {kafka.monitor_group: [topic]})
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    await producer.start()

    async def loop_turns(fresh: bool) -> int:
        """Event-loop turns one whole cycle takes (with new clients or kept ones)."""
        if fresh:
            await journal.close_clients()
        task = asyncio.create_task(journal.cycle())
        turns = 0
        while not task.done():
            await asyncio.sleep(0)
            turns += 1
        await task
        return turns

    try:
        sent = 0
        for fresh in (True, False):
            total = await loop_turns(fresh)
            for turns in range(0, total + 1, max(1, total // 12)):
                await (await producer.send(topic, f"r{sent}".encode(), partition=sent % 2))
                sent += 1
                if fresh:
                    await journal.close_clients()
                task = asyncio.create_task(journal.cycle())
                for _ in range(turns):
                    await asyncio.sleep(0)
                task.cancel()
                await asyncio.wait({task})
                await journal.cycle()
                held = {(p, off, value) for p in range(2)
                        for off, _, value, *_ in journal.store.all_records(topic, p)}
                assert held == await topic_rows(kafka, topic, 2), (fresh, turns, total)
                assert len(held) == sent
    finally:
        await producer.stop()
        await journal.aclose()
