"""The daemons' consumers hand out FetchedRecords equal to aiokafka's own ConsumerRecords.

Read from a real broker by two consumers side by side: one made by ``make_consumer`` (the
daemons' consumers) and a plain ``AIOKafkaConsumer`` (aiokafka's records, the truth).
"""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import ConsumerRecord

from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.fetched import FetchedRecord, fetched_value, install
from monitor.kafka.topics import make_consumer

from .kafkatools import fast_kafka

pytestmark = pytest.mark.broker

FIELDS = FetchedRecord.__struct_fields__


async def _publish(bootstrap: str, topic: str, compression: str | None) -> int:
    """Records with and without keys and headers on two partitions; returns the count."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=compression,
                                linger_ms=5)
    await producer.start()
    sent = []
    try:
        for n in range(300):
            key = None if n % 7 == 0 else f"k{n % 5}".encode()
            headers = [("h", str(n).encode()), ("x", b"")] if n % 3 == 0 else None
            sent.append(await producer.send(topic, f"value {n}".encode() * (n % 4),
                                            key=key, partition=n % 2, headers=headers,
                                            timestamp_ms=1_700_000_000_000 + n))
        await producer.flush()
        for fut in sent:
            await fut
    finally:
        await producer.stop()
    return len(sent)


async def _read_all(consumer: AIOKafkaConsumer, topic: str, total: int,
                    max_records: int) -> tuple[list[Any], dict[int, int]]:
    """Every record of ``topic`` from the beginning, with the positions after them."""
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in (0, 1)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        records: list[Any] = []
        while len(records) < total:
            got = await consumer.getmany(timeout_ms=2000, max_records=max_records)
            assert got, "the consumer stopped before every record was read"
            for tp in sorted(got, key=lambda tp: tp.partition):
                records.extend(got[tp])
        return records, {tp.partition: await consumer.position(tp) for tp in tps}
    finally:
        await consumer.stop()


@pytest.mark.parametrize("compression", [None, "zstd"])
async def test_fetched_records_equal_aiokafkas_records(broker: EmbeddedBroker,
                                                       compression: str | None) -> None:
    assert install(), "the installed aiokafka no longer has the shape fetched.py swaps"
    bootstrap = broker.bootstrap_servers
    topic = f"fetched-{compression}"
    total = await _publish(bootstrap, topic, compression)
    plain = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             enable_auto_commit=False)
    ours = make_consumer(fast_kafka(bootstrap), group_id=None)
    # Uneven batch sizes: a fetch's records handed out over several getmany calls.
    truth, truth_positions = await _read_all(plain, topic, total, max_records=37)
    lean, positions = await _read_all(ours, topic, total, max_records=11)
    assert all(type(r) is ConsumerRecord for r in truth)
    assert all(type(r) is FetchedRecord for r in lean)
    assert positions == truth_positions == {0: total // 2, 1: total // 2}

    def fields(r: Any) -> tuple[Any, ...]:
        return tuple(getattr(r, f) for f in FIELDS)

    assert sorted(map(fields, lean)) == sorted(map(fields, truth))
    # Headers keep aiokafka's type and the order they were sent in.
    headed = [r for r in lean if r.headers]
    assert headed and all(r.headers == (("h", str(int(r.timestamp) - 1_700_000_000_000)
                                         .encode()), ("x", b"")) for r in headed)


async def test_a_key_deserializer_keeps_aiokafkas_records(broker: EmbeddedBroker) -> None:
    """A FetchedRecord applies no deserializer: a consumer that asks for one keeps
    aiokafka's records, with its deserializers applied."""
    install()
    bootstrap = broker.bootstrap_servers
    total = await _publish(bootstrap, "fetched-keys", None)
    consumer = make_consumer(fast_kafka(bootstrap), group_id=None,
                             key_deserializer=lambda k: None if k is None else k.decode())
    records, _ = await _read_all(consumer, "fetched-keys", total, max_records=500)
    assert all(type(r) is ConsumerRecord for r in records)
    assert {r.key for r in records} == {None, "k0", "k1", "k2", "k3", "k4"}


def test_fetched_value_is_an_identity_deserializer() -> None:
    """What a consumer gets if the swap is ever unavailable: the value as it came."""
    assert fetched_value(b"\x00x") == b"\x00x"
    assert fetched_value(None) is None


def test_a_changed_aiokafka_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """If aiokafka's PartitionRecords loses the method fetched.py overrides (a future
    release), nothing is swapped: its consumers keep aiokafka's own records."""
    from aiokafka.consumer import fetcher

    from monitor.kafka import fetched

    class Reshaped:  # a PartitionRecords whose per-record method is gone
        def __init__(self, *args: object) -> None:
            self.args = args

    monkeypatch.setattr(fetcher, "PartitionRecords", Reshaped)
    assert fetched._swap() is False
    assert fetcher.PartitionRecords is Reshaped
