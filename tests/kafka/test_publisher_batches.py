"""Publisher.send_all: whole record batches land exactly where, and in the order, that the
producer's own per-record ``send`` puts the same records (a real broker; the per-record
path of a plain aiokafka producer is the truth)."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer

from monitor.daemon.publisher import Outgoing, Publisher
from monitor.daemon.retry import Backoff
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics, make_producer

from .kafkatools import TopicReader, by_partition, fast_kafka

pytestmark = pytest.mark.broker

PARTITIONS = 5


async def test_send_all_matches_per_record_sends(broker: EmbeddedBroker) -> None:
    # Tiny record batches: each partition's share spans many of them.
    k = fast_kafka(broker.bootstrap_servers, partitions=PARTITIONS, producer_batch_bytes=1024,
                   ratings_topic="batched", tier_changes_topic="one-by-one",
                   state_topic="explicit")
    await ensure_topics(k)
    keyed = [(f"eth:0x{i % 37:040x}".encode(), f"{i:05d}".encode() + b"x" * (i % 300))
             for i in range(600)]
    explicit = [(f"k{i}".encode(), f"state {i}".encode(), i % PARTITIONS) for i in range(50)]

    producer = make_producer(k)
    await producer.start()
    try:
        publisher = Publisher(producer, Backoff(0.1, 1.0), lambda: False,
                              lambda what, exc: None, lambda what: None)
        await publisher.send_all(
            [Outgoing("batched", value, key, None, None, "rating") for key, value in keyed]
            + [Outgoing("explicit", value, key, p, None, "state")
               for key, value, p in explicit])
        assert len(publisher) > PARTITIONS  # many batches in flight, none acknowledged yet
        await publisher.flush()
        assert len(publisher) == 0
    finally:
        await producer.stop()

    truth = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all",
                             enable_idempotence=False)
    await truth.start()
    try:
        for key, value in keyed:
            await (await truth.send("one-by-one", value, key=key))
    finally:
        await truth.stop()

    async with TopicReader(broker.bootstrap_servers, "batched") as batched, \
            TopicReader(broker.bootstrap_servers, "one-by-one") as single, \
            TopicReader(broker.bootstrap_servers, "explicit") as states:
        await batched.until(lambda rs: len(rs) == len(keyed), 30, "batched records")
        await single.until(lambda rs: len(rs) == len(keyed), 30, "single records")
        await states.until(lambda rs: len(rs) == len(explicit), 30, "state records")
    # Same partition per key, same order within each partition, nothing lost or doubled.
    assert by_partition(batched.records) == by_partition(single.records)
    assert len(by_partition(batched.records)) > 1
    assert by_partition(states.records) == {
        p: [(key, value) for key, value, q in explicit if q == p] for p in range(PARTITIONS)}
