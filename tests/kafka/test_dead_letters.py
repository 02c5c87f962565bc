"""Malformed tick records land in the DLQ with reasons; the good ones around them count."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaProducer

from monitor import health
from monitor.config import Config
from monitor.daemon import MonitorDaemon
from monitor.kafka.embedded import EmbeddedBroker
from monitor.ticks import make_tick

from .kafkatools import TopicReader, fast_kafka, group_caught_up, tick_records, wait_for

pytestmark = pytest.mark.broker

TOKEN = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
KEY = f"eth:{TOKEN}".encode()


def good(i: int) -> tuple[bytes | None, bytes]:
    tick = make_tick(1_678_000_000 + 60 * i, "eth", TOKEN, "USDC", "0.9995", "1")
    return tick_records([tick])[0]


BAD: list[tuple[str, bytes]] = [
    ("bad_json", b"\x00\xffnot json at all"),
    ("bad_schema", b'{"ts": "2023-03-01T00:00:00Z", "chain": 7, "token": "x"}'),
    ("bad_schema", b'{"ts": {"a": 1}, "chain": "eth", "token": "' + TOKEN.encode() + b'"}'),
    ("unknown_chain", b'{"ts": 1678000000, "chain": "solana", "token": "' + TOKEN.encode()
     + b'", "price_usd": "1"}'),
    ("bad_price", b'{"ts": 1678000000, "chain": "eth", "token": "' + TOKEN.encode()
     + b'", "price_usd": "NaN", "peg_usd": "1"}'),
    # An integer past a float's range: an OverflowError that crashed the loop before.
    ("bad_price", b'{"ts": 1678000000, "chain": "eth", "token": "' + TOKEN.encode()
     + b'", "price_usd": 1' + b"0" * 400 + b', "peg_usd": "1"}'),
    ("too_large", b'{"pad": "' + b"x" * (10 * 1024 * 1024) + b'"}'),
]


async def test_malformed_records_are_dead_lettered_and_good_ones_processed(
        broker: EmbeddedBroker) -> None:
    config = Config(kafka=fast_kafka(broker.bootstrap_servers, dlq_value_prefix_bytes=512))
    k = config.kafka
    stop = asyncio.Event()
    daemon = MonitorDaemon(config)
    task = asyncio.create_task(daemon.run(stop))
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers,
                                max_request_size=16 * 1024 * 1024, enable_idempotence=False)
    try:
        await wait_for(lambda: _ready(daemon), 30, "monitor ready")
        await producer.start()
        n_good = 0
        for _, value in BAD:
            for _ in range(3):
                key, tick = good(n_good)
                await producer.send_and_wait(k.ticks_topic, tick, key=key)
                n_good += 1
            await producer.send_and_wait(k.ticks_topic, value, key=KEY)
        # A valid tick under a key that is not its token's would split the token's state.
        _, stray = good(n_good + 1000)
        await producer.send_and_wait(k.ticks_topic, stray, key=b"eth:0xsomething-else")
        # And another token's tick under a key already seen with its own, valid ticks (the
        # daemon remembers checked keys: this one must still be compared with its tick).
        other = make_tick(1_678_000_000, "eth", "0x" + "11" * 20, "USDT", "1.0", "1")
        await producer.send_and_wait(k.ticks_topic, tick_records([other])[0][1], key=KEY)
        for _ in range(3):
            key, tick = good(n_good)
            await producer.send_and_wait(k.ticks_topic, tick, key=key)
            n_good += 1

        async with TopicReader(broker.bootstrap_servers, k.dlq_topic) as dlq:
            await dlq.until(lambda r: len(r) >= len(BAD) + 2, 60, "dead letters")
            await wait_for(lambda: group_caught_up(broker.bootstrap_servers, k.monitor_group,
                                                   k.ticks_topic), 30, "offsets committed")
            await dlq.poll(300)
            letters = dlq.records
        reasons = [dict(r.headers)["x-dlq-reason"].decode() for r in letters]
        # The wrongly keyed record sits in another partition: compare without order.
        assert sorted(reasons) == sorted([r for r, _ in BAD] + ["bad_key", "bad_key"])
        for rec in letters:
            headers = dict(rec.headers)
            assert headers["x-dlq-source-topic"] == k.ticks_topic.encode()
            assert int(headers["x-dlq-source-offset"]) >= 0
            assert headers["x-dlq-detail"]
            assert len(rec.value) <= 512  # a bounded prefix, even of the 10 MB record
        big = next(dict(r.headers) for r in letters
                   if dict(r.headers)["x-dlq-reason"] == b"too_large")
        assert big["x-dlq-original-bytes"] == str(len(BAD[-1][1])).encode()
        assert big["x-dlq-truncated"] == b"true"
        assert daemon.stats.dead_letters == len(BAD) + 2
        assert daemon.stats.ticks == n_good  # every good record around them was processed
        ok, detail = await daemon.check()
        assert ok, detail
        _, report = await health.run_checks()  # what /readyz shows
        assert report["monitor"]["ok"], report
    finally:
        await producer.stop()
        stop.set()
        await asyncio.wait_for(task, 30)


async def _ready(daemon: MonitorDaemon) -> bool:
    return (await daemon.check())[0]
