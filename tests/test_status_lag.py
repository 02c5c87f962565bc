"""`depeg-monitor status` reports consumer lag against the records really on the broker.

The truth is what the test produced and committed, not an offset the broker reports:
on the embedded broker ``end_offsets`` stops at the start of a partition's last batch,
which made lag read 0 while whole batches were unread.
"""

from __future__ import annotations

import pytest
from aiokafka import TopicPartition

from monitor.config import Config, KafkaConfig
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics, make_consumer, make_producer
from monitor.status import Report, read_lag

pytestmark = pytest.mark.broker

PRODUCED = 300
COMMITTED = 40


async def test_lag_counts_every_unread_record_of_the_last_batch(broker: EmbeddedBroker) -> None:
    k = KafkaConfig(bootstrap_servers=broker.bootstrap_servers)
    await ensure_topics(k)
    producer = make_producer(k, linger_ms=50)
    await producer.start()
    try:  # one key, so one partition; sent without waiting, so in few large batches
        futures = [await producer.send(k.ticks_topic, b"{}", key=b"eth:0xabc")
                   for _ in range(PRODUCED)]
        partition = (await futures[-1]).partition
    finally:
        await producer.stop()
    group = make_consumer(k, group_id=k.monitor_group)
    await group.start()
    try:
        tp = TopicPartition(k.ticks_topic, partition)
        group.assign([tp])
        await group.commit({tp: COMMITTED})
    finally:
        await group.stop()

    report = Report()
    await read_lag(Config(kafka=k), report)
    assert report.broker_error is None
    assert report.lag["monitor"] == PRODUCED - COMMITTED
