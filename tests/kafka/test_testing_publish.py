"""``monitor.testing.publish`` on a real broker: every record once, each key's records in
their order, in the partition aiokafka's default partitioner gives its key.

The expectation is worked out apart from the helper: the records as made here, and the
partition from murmur2 over the topic's partitions (``kafkatools.partition_of``). The
topic is read to the end offsets the broker gives once the helper has returned, so a
record sent twice fails the test wherever the copy lands.
"""

from __future__ import annotations

import pytest

from monitor.kafka.embedded import EmbeddedBroker
from monitor.testing import publish
from tests.webhook_support import create_topic

from .kafkatools import TopicReader, by_partition, partition_of

pytestmark = pytest.mark.broker

PARTITIONS = 4


@pytest.mark.parametrize("window", [1, 7, 5000])
async def test_publish_puts_every_record_once_in_order_on_its_keys_partition(
        broker: EmbeddedBroker, window: int) -> None:
    topic = f"publish-{window}"
    await create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    keys = [f"eth:0x{n:040x}" for n in range(9)]
    records = [(keys[i % len(keys)].encode(), f'{{"seq":{i}}}'.encode()) for i in range(250)]

    # A generator: the helper must not need a sized input.
    assert await publish(broker.bootstrap_servers, topic, iter(records), window=window) \
        == len(records)

    expected: dict[int, list[tuple[bytes, bytes]]] = {}
    for key, value in records:
        expected.setdefault(partition_of(key.decode(), PARTITIONS), []).append((key, value))
    async with TopicReader(broker.bootstrap_servers, topic) as reader:
        got = await reader.to_end(within=30)
    assert len(got) == len(records)
    assert by_partition(got) == expected
