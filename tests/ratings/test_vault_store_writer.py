"""The store writer's vault half, fed by real topics on a real broker, into both databases.

Independent truth: the vault engine run over the same fact records. The stored facts must
equal the engine's merged facts, the latest rating its last record per vault, and the
history every record it published; replaying the topics from the start changes nothing.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

import msgspec
from aiokafka import AIOKafkaProducer
from prometheus_client import REGISTRY

from consumers.store_writer import StoreWriter
from monitor.config import Config, KafkaConfig
from monitor.kafka.embedded import EmbeddedBroker
from monitor.storage import connect
from monitor.storage.ratings import RatingsStore
from monitor.storage.vaults import VaultStore
from monitor.timefmt import format_ts, parse_ts
from monitor.vaults.config import VaultsConfig
from monitor.vaults.engine import VaultEngine
from monitor.vaults.facts import decode_facts
from monitor.vaults.records import VaultRating, encode_rating
from tests.readapi_support import wait_for
from tests.store_writer_support import replay_from_start

T0 = 1_678_500_000.0


def fact_lines(n_vaults: int = 6, n_updates: int = 40, seed: int = 3) -> list[bytes]:
    """Partial updates: first a full-ish record per vault, then random single-fact changes."""
    rnd = random.Random(seed)
    lines: list[bytes] = []
    vaults = [f"0x{0xb00 + i:040x}" for i in range(n_vaults)]
    for i, v in enumerate(vaults):
        lines.append(msgspec.json.encode({
            "ts": format_ts(T0 + i), "chain": "eth", "vault": v, "name": f"V{i}",
            "symbol": f"v{i}", "protocol": "lendA", "contract_type": "erc4626_vault",
            "underlying_symbol": "USDC", "underlying_risk": "battle_tested",
            "underlying_address": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",
            "tvl_usd": "1000000.5", "source_verified": True, "audit_count": 2,
            "owner_kind": "multisig", "timelock_seconds": 172800, "redemption_open": True,
            "event_count": 500, "deployed_at": "2021-01-01T00:00:00Z",
            "looping_markets": [{"market": "m", "rate": 0.1}]}))
    changes: list[dict[str, Any]] = [
        {"redemption_open": False}, {"redemption_open": True}, {"tvl_usd": 12.5},
        {"owner_kind": "eoa"}, {"name": None}, {"bad_debt_usd": 5000}, {"bad_debt_usd": 0},
        {"utilization": 0.99}, {"apy_pct": "7.25"}, {"looping_rate": 0.8},
    ]
    for k in range(n_updates):
        body = {"ts": format_ts(T0 + 100 + k), "chain": "eth", "vault": rnd.choice(vaults),
                **rnd.choice(changes)}
        lines.append(msgspec.json.encode(body))
    return lines


def engine_truth(lines: list[bytes]) -> tuple[VaultEngine, list[VaultRating]]:
    engine = VaultEngine(VaultsConfig())
    out: list[VaultRating] = []
    for line in lines:
        out.extend(engine.process(decode_facts(line)))
    return engine, out


async def produce(broker: EmbeddedBroker, config: Config, lines: list[bytes],
                  records: list[VaultRating]) -> int:
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
    await producer.start()
    try:
        for line in lines:
            update = decode_facts(line)
            await producer.send_and_wait(config.vaults.facts_topic, line,
                                         key=update.key.encode())
        for r in records:
            await producer.send_and_wait(config.vaults.ratings_topic, encode_rating(r),
                                         key=r.key.encode())
        for junk in (b"not json", b'{"chain": "eth"}', b'{"ts": 1, "chain": "xx", "vault": 1}'):
            await producer.send_and_wait(config.vaults.facts_topic, junk, key=b"x")
        await producer.send_and_wait(config.vaults.ratings_topic, b"[]", key=b"x")
    finally:
        await producer.stop()
    return len(lines) + len(records) + 4


async def dump(db: Any) -> list[list[dict[str, Any]]]:
    return [await db.fetch("SELECT v.*, d.facts, d.record FROM vaults v JOIN vault_documents d"
                           " USING (chain, vault) ORDER BY chain, vault"),
            await db.fetch("SELECT * FROM vault_rating_history ORDER BY chain, vault, ts")]


async def test_vault_store_writer_matches_the_engine_and_is_idempotent(
        broker: EmbeddedBroker, storage_url: str) -> None:
    config = Config(kafka=KafkaConfig(bootstrap_servers=broker.bootstrap_servers,
                                      batch_max_records=7))
    lines = fact_lines()
    engine, records = engine_truth(lines)
    assert len(records) > 10
    db = await connect(storage_url)
    store = RatingsStore(db)
    await store.migrate()
    await VaultStore(db).migrate()
    writer = StoreWriter(config, store)
    stop = asyncio.Event()
    try:
        sent = await produce(broker, config, lines, records)
        task = asyncio.create_task(writer.run(stop))
        await wait_for(lambda: writer.stats.records >= sent)
        want = sorted({(r.vault, parse_ts(r.ts)): r for r in records})

        async def written() -> bool:
            # The writer counts a record when it decodes it, before its batch is written.
            vaults, history = await dump(db)
            return len(vaults) >= 6 and len(history) >= len(want)

        await wait_for(written)
        first = await dump(db)
        assert writer.vaults.undecodable == 4
        vaults, history = first
        assert len(vaults) == 6
        for row in vaults:
            state = engine.state(f"{row['chain']}:{row['vault']}")
            assert state is not None
            assert msgspec.json.decode(row["facts"]) == msgspec.json.decode(
                msgspec.json.encode(state.facts))
            assert row["tvl_usd"] == state.facts.tvl_usd and row["name"] == state.facts.name
            last = [r for r in records if r.vault == row["vault"]][-1]
            assert (row["rating"], row["tier"], row["verdict"]) == (
                last.rating, last.tier, last.verdict)
            assert msgspec.json.decode(row["record"]) == msgspec.json.decode(encode_rating(last))
        assert [(h["vault"], h["ts"]) for h in history] == want
        latest = Counter((r.tier, r.verdict) for r in {r.vault: r for r in records}.values())

        def gauges_match() -> bool:  # the gauges count what is stored (recounted when idle)
            return all(REGISTRY.get_sample_value(
                "depeg_store_vaults", {"tier": t, "verdict": v}) == n
                for (t, v), n in latest.items())

        await wait_for(gauges_match)

        stop.set()
        await asyncio.wait_for(task, 10)
        # A new group replays every topic from the start: the same rows.
        await replay_from_start(config, store, sent)
        assert await dump(db) == first
    finally:
        stop.set()
        await db.close()
