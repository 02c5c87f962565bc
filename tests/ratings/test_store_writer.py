"""The store writer fed by real Kafka topics on a real broker, into both databases."""

from __future__ import annotations

import asyncio

import msgspec
from aiokafka import AIOKafkaProducer

from consumers.store_writer import StoreWriter
from monitor.config import Config, KafkaConfig
from monitor.kafka.embedded import EmbeddedBroker
from monitor.records import encode
from monitor.storage import connect
from monitor.storage.ratings import RatingsStore
from tests.readapi_support import story, wait_for
from tests.store_writer_support import replay_from_start

TOKEN = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
PATH = [("ok", 10, 1.0), ("watch", 45, 0.99), ("critical", 85, 0.88), ("critical", 90, 0.87),
        ("warning", 65, 0.95), ("ok", 20, 0.999), ("ok", 10, 1.0)]


async def produce(broker: EmbeddedBroker, config: Config) -> int:
    snaps, events = story("eth", TOKEN, PATH)
    other = story("base", "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913",
                  [("ok", 5, 1.0), ("premium", 5, 1.01), ("ok", 5, 1.0)])
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
    await producer.start()
    n = 0
    try:
        for s in [*snaps, *other[0]]:
            await producer.send_and_wait(config.kafka.ratings_topic, encode(s),
                                         key=f"{s.chain}:{s.token_address}".encode())
            n += 1
        for e in [*events, *other[1]]:
            await producer.send_and_wait(config.kafka.tier_changes_topic, encode(e),
                                         key=f"{e.data.chain}:{e.data.token_address}".encode())
            n += 1
        nul = encode(msgspec.structs.replace(snaps[0], symbol="US\x00DC"))
        assert b"\\u0000" in nul  # valid JSON, but PostgreSQL text cannot hold it
        for junk in (b"not json", b'{"chain": "eth"}', nul):
            await producer.send_and_wait(config.kafka.ratings_topic, junk, key=b"x")
            n += 1
        await producer.send_and_wait(config.kafka.tier_changes_topic, b"[]", key=b"x")
        n += 1
    finally:
        await producer.stop()
    return n


async def dump(store: RatingsStore) -> list[list[dict[str, object]]]:
    """Every row, less when it arrived (wall clock): a replay rewrites that by design."""
    out = []
    for t in ("rating_history", "rating_latest", "tier_changes", "depeg_episodes"):
        rows = await store.db.fetch(f"SELECT * FROM {t} ORDER BY 1, 2, 3")
        out.append([{k: v for k, v in dict(r).items() if k != "received_at"} for r in rows])
    return out


async def test_store_writer_is_idempotent_on_replay(broker: EmbeddedBroker,
                                                   storage_url: str) -> None:
    config = Config(kafka=KafkaConfig(bootstrap_servers=broker.bootstrap_servers,
                                      batch_max_records=5))
    db = await connect(storage_url)
    store = RatingsStore(db)
    await store.migrate()
    writer = StoreWriter(config, store)
    stop = asyncio.Event()
    try:
        sent = await produce(broker, config)
        task = asyncio.create_task(writer.run(stop))
        await wait_for(lambda: writer.stats.records >= sent)

        async def written() -> bool:
            # The writer counts a record when it decodes it, before its batch is written.
            rows = await dump(store)
            return len(rows[0]) >= 10 and len(rows[2]) >= 6

        await wait_for(written)
        first = await dump(store)
        assert len(first[0]) == 10 and len(first[2]) == 6 and writer.stats.undecodable == 4
        [ep] = first[3]
        assert ep["worst_tier"] == "critical" and ep["recovered_at"] is not None
        assert writer.stats.batches >= 3  # batched by batch_max_records

        await produce(broker, config)  # the same records again
        await wait_for(lambda: writer.stats.records >= 2 * sent)
        assert await dump(store) == first

        stop.set()
        await asyncio.wait_for(task, 10)
        # A new consumer group replays both topics from the start: still the same rows.
        await replay_from_start(config, store, 2 * sent)
        assert await dump(store) == first
    finally:
        stop.set()
        await db.close()



async def test_a_record_the_database_refuses_is_skipped_not_retried_forever(
        storage_url: str) -> None:
    db = await connect(storage_url)
    store = RatingsStore(db)
    await store.migrate()
    # The database itself refuses ratings above 1000 (a stand-in for any content error).
    if db.dialect == "postgresql":
        await db.execute("ALTER TABLE rating_history ADD CONSTRAINT sane CHECK (rating <= 1000)")
    else:
        await db.execute("CREATE TRIGGER sane BEFORE INSERT ON rating_history"
                         " WHEN NEW.rating > 1000 BEGIN SELECT RAISE(ABORT, 'insane'); END")
    snaps, events = story("eth", TOKEN, PATH)
    poison = msgspec.structs.replace(snaps[3], rating=5000.0)
    writer = StoreWriter(Config(), store)
    try:
        written = await asyncio.wait_for(
            writer._write([*snaps[:3], poison, *snaps[4:]], events, asyncio.Event()), 10)
        assert written and writer.stats.undecodable == 1
        assert await db.fetchval("SELECT COUNT(*) FROM rating_history") == len(snaps) - 1
        assert await db.fetchval("SELECT COUNT(*) FROM tier_changes") == len(events)
    finally:
        await db.close()
