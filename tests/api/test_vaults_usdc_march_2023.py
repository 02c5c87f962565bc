"""Acceptance: a USDC vault follows the real USDC March 2023 depeg, end to end.

On a real broker: facts for a vault on eth whose underlying is USDC (its address from the
registry file), then the real USDC ticks of March 2023 through the depeg monitor daemon (a
child process). The vault daemon follows ``depeg.tier-changes``; the store writer fills the
store; the live API serves E5. Independent truth: the depeg engine run over the same ticks
in-process. The vault must carry ``vault-underlying-depeg-critical`` exactly while USDC is
critical: gained when USDC goes critical, lost when it leaves critical, both on
``vaults.ratings`` and in E5's history.
"""

from __future__ import annotations

import asyncio
from itertools import pairwise
from pathlib import Path

import aiohttp
import msgspec
import pytest

from consumers.store_writer import StoreWriter
from monitor.api.app import create_app
from monitor.config import Config, RegistryConfig
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics, ensure_vault_topics
from monitor.registry import load_registry
from monitor.storage import connect
from monitor.storage import vaults_read as reads
from monitor.storage.ratings import RatingsStore
from monitor.testing import publish
from monitor.timefmt import parse_ts
from monitor.vaults.daemon import VaultDaemon
from monitor.vaults.records import decode_rating
from tests.conftest import data_file
from tests.kafka.kafkatools import (
    MonitorProcess,
    TopicReader,
    engine_transitions,
    fast_kafka,
    load_ticks,
    tick_records,
    wait_for,
)
from tests.readapi_support import api_headers, serve

pytestmark = [pytest.mark.broker, pytest.mark.data]

REGISTRY = Path(__file__).resolve().parents[2] / "deploy" / "tokens.example.toml"
VAULT = "0x00000000000000000000000000000000000c0de1"
CRITICAL = "vault-underlying-depeg-critical"


def usdc_on_eth() -> str:
    [usdc] = [t for t in load_registry(REGISTRY) if t.chain == "eth" and t.symbol == "USDC"]
    return usdc.address


def tier_at(changes: list[tuple[float, str]], ts: float) -> str:
    tier = "ok"
    for at, new in changes:
        if at <= ts:
            tier = new
    return tier


async def test_usdc_vault_follows_the_march_2023_depeg(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    ticks = load_ticks(data_file("ticks/usdc_2023-03_binanceus_1m.csv"))
    truth = engine_transitions(ticks)
    changes = [(parse_ts(e.timestamp), e.data.new_tier) for e in truth]
    critical = [ts for ts, tier in changes if tier == "critical"]
    assert critical, "the engine must see USDC go critical in March 2023"
    left = [ts for (_, prev), (ts, tier) in pairwise(changes)
            if prev == "critical" and tier != "critical"]
    assert left, "... and leave critical again"
    usdc = usdc_on_eth()

    config = Config(kafka=fast_kafka(broker.bootstrap_servers),
                    registry=RegistryConfig(path=str(REGISTRY)))
    await ensure_topics(config.kafka)
    await ensure_vault_topics(config.kafka, config.vaults)
    fact = msgspec.json.encode({
        "ts": "2023-03-01T00:00:00Z", "chain": "eth", "vault": VAULT, "name": "USDC vault",
        "symbol": "vUSDC", "protocol": "lendA", "contract_type": "erc4626_vault",
        "underlying_symbol": "USDC", "underlying_address": usdc,
        "underlying_risk": "battle_tested", "tvl_usd": 2.5e8, "owner_kind": "multisig",
        "timelock_seconds": 172800, "redemption_open": True, "source_verified": True,
        "audit_count": 4, "event_count": 90000, "deployed_at": "2021-01-01T00:00:00Z"})
    await publish(broker.bootstrap_servers, config.vaults.facts_topic,
                  [(f"eth:{VAULT}".encode(), fact)])

    db = await connect(f"sqlite:///{tmp_path / 'store.db'}")
    store = RatingsStore(db)
    await store.migrate()
    stop = asyncio.Event()
    daemon = asyncio.create_task(VaultDaemon(config).run(stop))
    writer = StoreWriter(config, store)
    writing = asyncio.create_task(writer.run(stop))
    monitor = MonitorProcess(config.kafka, tmp_path / "monitor.log")
    try:
        await publish(broker.bootstrap_servers, config.kafka.ticks_topic, tick_records(ticks))
        last_change = changes[-1][0]
        async with TopicReader(broker.bootstrap_servers, config.vaults.ratings_topic) as topic:
            await topic.until(
                lambda recs: any(parse_ts(decode_rating(r.value).ts) >= last_change
                                 for r in recs), 300, "the vault re-rated at the last change")
            records = [decode_rating(r.value) for r in topic.records]
        mine = [r for r in records if r.vault == VAULT]
        assert mine[0].tier == "low" and CRITICAL not in mine[0].tags

        # On the topic: the tag exactly while USDC is critical, gained and lost on time.
        for r in mine:
            ts = parse_ts(r.ts)
            assert (CRITICAL in r.tags) == (tier_at(changes, ts) == "critical"), r
        gained = [parse_ts(r.ts) for r in mine if CRITICAL in r.tags]
        assert gained[0] == critical[0]  # re-rated at the depeg's own event time
        lost = [parse_ts(b.ts) for a, b in pairwise(mine)
                if CRITICAL in a.tags and CRITICAL not in b.tags]
        assert lost and lost[0] == left[0]

        # In E5, once the store writer has the last record.
        async def stored() -> bool:
            v = await reads.get_vault(db, "eth", VAULT)
            depeg = (await reads.underlying_ratings(db, "eth", [usdc])).get(usdc)
            return (v is not None and v.rating_ts == parse_ts(mine[-1].ts)
                    and depeg is not None and depeg["ts"] >= last_change)

        await wait_for(stored, 60, "the store writer to store the last records")
        app = create_app(config, db)
        async with serve(app) as base, aiohttp.ClientSession(
                headers=await api_headers(db)) as session:
            async with session.get(f"{base}/vaults/{VAULT}", params={"chain": "eth"}) as resp:
                assert resp.status == 200
                body = await resp.json()
        assert CRITICAL not in body["tags"] and body["tags"] == mine[-1].tags
        [part] = body["composition"]
        # The depeg monitor's current rating of USDC, as /rwa shows it: recovered.
        assert part["address"] == usdc and part["depeg"]["tier"] == changes[-1][1]
        points = body["history"]["points"]
        assert [(p["timestamp"], p["tags"]) for p in points] == [(r.ts, r.tags) for r in mine]
        assert any(CRITICAL in p["tags"] for p in points)
    finally:
        stop.set()
        monitor.stop()
        await asyncio.wait_for(asyncio.gather(daemon, writing, return_exceptions=True), 30)
        await db.close()
