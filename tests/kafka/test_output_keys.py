"""``OutputWriter.emit``: rating snapshots and tier changes land on their topics with the
record key ``chain:token`` and the bytes of ``records.encode``, in the partition and order
a per-record send of those puts them, also for one address on two chains (whose second
chain's key is not the cached one) — the truth is a plain aiokafka producer sending each
record with the key formatted from the record itself, on a real broker."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from monitor.daemon.outputs import DaemonStats, OutputWriter
from monitor.daemon.publisher import Publisher
from monitor.daemon.retry import Backoff
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics, make_producer
from monitor.records import RatingSnapshot, SignalValue, TierChangeData, TierChangeEvent, encode

from .kafkatools import TopicReader, by_partition, fast_kafka

pytestmark = pytest.mark.broker

PARTITIONS = 5


def _snapshot(chain: str, address: str, n: int) -> RatingSnapshot:
    return RatingSnapshot(
        chain=chain, token_address=address, symbol="USDX", timestamp=f"2026-01-01T00:{n:02d}:00Z",
        rating=float(n), tier="ok", band_tier="ok", price_usd="0.999", peg_usd="1",
        deviation_pct=-0.1, staleness_seconds=0.0, metrics={"stale": 0.0},
        signals=[SignalValue(name="price_deviation", value=0.1, score=0.0, weight=10,
                             contribution=0.0, observed=True)])


def _change(chain: str, address: str, n: int) -> TierChangeEvent:
    return TierChangeEvent(
        event_type="DEPEG_TIER_CHANGE", event_id=f"id-{n}", timestamp=f"2026-01-01T00:{n:02d}:00Z",
        data=TierChangeData(token_address=address, chain=chain, symbol="USDX", old_tier="ok",
                            new_tier="watch", risk_score=40.0, deviation_pct=-1.0,
                            price_usd="0.99", peg_usd="1"))


async def test_emitted_keys_and_bytes_match_per_record_sends(broker: EmbeddedBroker) -> None:
    k = fast_kafka(broker.bootstrap_servers, partitions=PARTITIONS,
                   ratings_topic="ratings", tier_changes_topic="changes")
    await ensure_topics(k)
    # The truth's topics with as many partitions (a partition is the key's hash over them).
    await ensure_topics(fast_kafka(broker.bootstrap_servers, partitions=PARTITIONS,
                                   ratings_topic="ratings-truth",
                                   tier_changes_topic="changes-truth"))
    shared = "0x" + "5" * 40  # one address on two chains, interleaved
    batches: list[list[Any]] = []
    for b in range(6):
        outputs: list[Any] = []
        for n in range(b * 10, b * 10 + 10):
            chain, address = (("eth", shared), ("arb", shared),
                              ("eth", f"0x{n % 7:040x}"))[n % 3]
            outputs.append(_snapshot(chain, address, n) if n % 4 else
                           _change(chain, address, n))
        batches.append(outputs)

    producer = make_producer(k)
    await producer.start()
    stats = DaemonStats()
    try:
        publisher = Publisher(producer, Backoff(0.1, 1.0), lambda: False,
                              lambda what, exc: None, lambda what: None)
        writer = OutputWriter(k, publisher, stats)
        for outputs in batches:
            await writer.emit(outputs)
        await publisher.flush()
    finally:
        await producer.stop()
    everything = [o for outputs in batches for o in outputs]
    snapshots = [o for o in everything if isinstance(o, RatingSnapshot)]
    changes = [o for o in everything if isinstance(o, TierChangeEvent)]
    assert stats.ratings == len(snapshots) and stats.tier_changes == len(changes)

    truth = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all",
                             enable_idempotence=False)
    await truth.start()
    try:
        for s in snapshots:
            await (await truth.send("ratings-truth", encode(s),
                                    key=f"{s.chain}:{s.token_address}".encode()))
        for c in changes:
            await (await truth.send("changes-truth", encode(c),
                                    key=f"{c.data.chain}:{c.data.token_address}".encode()))
    finally:
        await truth.stop()

    readers = {name: TopicReader(broker.bootstrap_servers, name)
               for name in ("ratings", "ratings-truth", "changes", "changes-truth")}
    wanted = {"ratings": len(snapshots), "ratings-truth": len(snapshots),
              "changes": len(changes), "changes-truth": len(changes)}
    for name, reader in readers.items():
        count = wanted[name]

        def complete(records: list[Any], n: int = count) -> bool:
            return len(records) == n

        async with reader:
            await reader.until(complete, 30, name)
    assert by_partition(readers["ratings"].records) == \
        by_partition(readers["ratings-truth"].records)
    assert by_partition(readers["changes"].records) == \
        by_partition(readers["changes-truth"].records)
    keys = {rec.key for rec in readers["ratings"].records}
    assert {f"eth:{shared}".encode(), f"arb:{shared}".encode()} <= keys
