"""The vault daemon on a real broker: its records on vaults.ratings are replay's, byte for
byte and in order per vault; bad fact records become dead letters with their reason; a depeg
tier change arriving live re-rates the vaults holding the token; kill -9 mid-stream loses no
change and publishes nothing replay would not."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from monitor.config import Config
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics, ensure_vault_topics
from monitor.records import TierChangeEvent, encode
from monitor.testing import publish
from monitor.vaults.config import VaultsConfig
from monitor.vaults.daemon import VaultDaemon
from monitor.vaults.facts import FactUpdate, encode_update
from monitor.vaults.records import encode_rating
from monitor.vaults.replay import VaultReplaySummary, read_inputs, run_vault_replay
from tests.kafka.kafkatools import (
    MonitorProcess,
    TopicReader,
    fast_kafka,
    group_caught_up,
    wait_for,
)

from .support import (
    START,
    depeg_episode,
    synthetic_updates,
    tier_change,
    write_events,
    write_facts,
)

pytestmark = [pytest.mark.broker]


def replay_records(tmp_path: Path, updates: list[FactUpdate],
                   events: list[TierChangeEvent]) -> list[bytes]:
    """Independent truth: the replay command's engine over the same inputs."""
    facts = write_facts(tmp_path / "truth-facts.jsonl", updates)
    depeg = write_events(tmp_path / "truth-depeg.jsonl", events)
    items = read_inputs([facts], [depeg], VaultReplaySummary())
    return [encode_rating(r) for r in run_vault_replay(items, VaultsConfig())]


def per_vault(values: list[bytes]) -> dict[bytes, list[bytes]]:
    """Records per vault in topic order, a repeated record (re-produced) kept once."""
    import json

    out: dict[bytes, list[bytes]] = defaultdict(list)
    seen: set[bytes] = set()
    for value in values:
        if value in seen:
            continue
        seen.add(value)
        out[json.loads(value)["vault"].encode()].append(value)
    return dict(out)


def fact_records(updates: list[FactUpdate]) -> list[tuple[bytes | None, bytes]]:
    return [(u.key.encode(), encode_update(u)) for u in updates]


def linked_tokens(updates: list[FactUpdate]) -> list[tuple[str, str]]:
    found = {(u.chain, u.changes["underlying_address"]) for u in updates
             if u.changes.get("underlying_address")}
    return sorted(found)


async def committed_any(bootstrap: str, group: str, topic: str) -> bool:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer.topics()
        for p in consumer.partitions_for_topic(topic) or ():
            if await consumer.committed(TopicPartition(topic, p)):
                return True
        return False
    finally:
        await consumer.stop()


async def setup_topics(config: Config) -> None:
    await ensure_topics(config.kafka)
    await ensure_vault_topics(config.kafka, config.vaults)


async def test_daemon_publishes_what_replay_writes(broker: EmbeddedBroker, tmp_path: Path) -> None:
    kafka = fast_kafka(broker.bootstrap_servers)
    config = Config(kafka=kafka, vaults=VaultsConfig())
    await setup_topics(config)
    updates = synthetic_updates(vaults=12, hours=6)
    tokens = linked_tokens(updates)
    early = depeg_episode(*tokens[0], START + 3600)
    # Known before the daemon starts (read whole at start), and facts already waiting.
    await publish(broker.bootstrap_servers, kafka.tier_changes_topic,
                  [(f"{e.data.chain}:{e.data.token_address}".encode(), encode(e))
                   for e in early])
    bad = [(b"eth:0x" + b"1" * 40, b"{not json"),
           (b"eth:0x" + b"2" * 40, encode_update(updates[0]))]  # key of another vault
    await publish(broker.bootstrap_servers, config.vaults.facts_topic,
                  [*fact_records(updates), *bad])
    stop = asyncio.Event()
    daemon = VaultDaemon(config)
    task = asyncio.create_task(daemon.run(stop))
    try:
        expected = replay_records(tmp_path, updates, early)
        async with TopicReader(broker.bootstrap_servers, config.vaults.ratings_topic) as out:
            await out.until(lambda r: len(r) >= len(expected), 60, "the replay's records")
            assert per_vault([r.value for r in out.records]) == per_vault(expected)
            # Live: a token goes critical after every fact; its holders re-rate at once.
            late = tier_change(START + 7 * 3600, *tokens[-1], "ok", "critical")
            expected = replay_records(tmp_path, updates, [*early, late])
            await publish(broker.bootstrap_servers, kafka.tier_changes_topic,
                          [(f"{tokens[-1][0]}:{tokens[-1][1]}".encode(), encode(late))])
            await out.until(lambda r: len(r) >= len(expected), 30, "the live re-rating")
            live = per_vault([r.value for r in out.records])
            assert live == per_vault(expected)
            assert any(b'"ts":"2023-11-15T05:13:20Z"' in v and b"depeg-critical" in v
                       for values in live.values() for v in values)
        async with TopicReader(broker.bootstrap_servers, config.vaults.dlq_topic) as dlq:
            await dlq.until(lambda r: len(r) >= 2, 30, "two dead letters")
            reasons = sorted(dict(r.headers)["x-dlq-reason"] for r in dlq.records)
            assert reasons == [b"bad_json", b"bad_key"]
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
    assert daemon.stats.dead_letters == 2


async def test_kill9_mid_stream_loses_nothing_and_invents_nothing(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    # Small batches and a 1 s checkpoint: the kill lands after some checkpoints (states to
    # restore, offsets committed) and before the end (records to re-produce).
    kafka = fast_kafka(broker.bootstrap_servers, batch_max_records=10,
                       checkpoint_interval_seconds=1.0)
    config = Config(kafka=kafka, vaults=VaultsConfig(group="vaults-kill9"))
    await setup_topics(config)
    updates = synthetic_updates(vaults=60, hours=48)
    events: list[TierChangeEvent] = []
    for n, token in enumerate(linked_tokens(updates)[:3]):
        events += depeg_episode(*token, START + (2 + 5 * n) * 3600)
    await publish(broker.bootstrap_servers, kafka.tier_changes_topic,
                  [(f"{e.data.chain}:{e.data.token_address}".encode(), encode(e))
                   for e in events])
    await publish(broker.bootstrap_servers, config.vaults.facts_topic, fact_records(updates))
    expected = replay_records(tmp_path, updates, events)
    env = {"DEPEG_VAULTS__GROUP": "vaults-kill9"}
    first = MonitorProcess(kafka, tmp_path / "first.log", "vaults", env)
    try:
        async with TopicReader(broker.bootstrap_servers, config.vaults.ratings_topic) as out:
            await out.until(lambda r: len(r) >= 0.25 * len(expected), 120, "25 % of records")
            await wait_for(lambda: committed_any(broker.bootstrap_servers, "vaults-kill9",
                                                 config.vaults.facts_topic),
                           60, "a first checkpoint")
            first.kill9()
        assert not await group_caught_up(broker.bootstrap_servers, "vaults-kill9",
                                         config.vaults.facts_topic)
    finally:
        first.stop()
    second = MonitorProcess(kafka, tmp_path / "second.log", "vaults", env)
    try:
        await wait_for(lambda: group_caught_up(broker.bootstrap_servers, "vaults-kill9",
                                               config.vaults.facts_topic),
                       120, "the group to commit every fact")
        async with TopicReader(broker.bootstrap_servers, config.vaults.ratings_topic) as out:
            await out.until(lambda r: len(set(x.value for x in r)) >= len(expected), 60,
                            "every record")
            while await out.poll(500):
                pass
            values: list[Any] = [r.value for r in out.records]
        assert set(values) == set(expected)  # nothing lost, nothing replay would not write
        assert per_vault(values) == per_vault(expected)  # and in order per vault
        assert len(second.events("vaults.partitions_assigned")) >= 1
        assert sum(e["restored_vaults"] for e in second.events("vaults.partitions_assigned"))
    finally:
        assert second.stop() == 0


async def test_two_instances_split_the_vaults_and_agree_with_replay(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    """Scale-out: a second instance joins mid-stream; partitions move with their vault
    states; together they publish exactly replay's records."""
    kafka = fast_kafka(broker.bootstrap_servers)
    config = Config(kafka=kafka, vaults=VaultsConfig(group="vaults-two"))
    await setup_topics(config)
    updates = synthetic_updates(vaults=24, hours=8)
    events = depeg_episode(*linked_tokens(updates)[0], START + 3600)
    await publish(broker.bootstrap_servers, kafka.tier_changes_topic,
                  [(f"{e.data.chain}:{e.data.token_address}".encode(), encode(e))
                   for e in events])
    half = START + 4 * 3600
    await publish(broker.bootstrap_servers, config.vaults.facts_topic,
                  fact_records([u for u in updates if u.ts <= half]))
    expected = replay_records(tmp_path, updates, events)
    stop = asyncio.Event()
    first = VaultDaemon(config, check_name="vaults-a")
    second = VaultDaemon(config, check_name="vaults-b")
    tasks = [asyncio.create_task(first.run(stop))]
    try:
        await asyncio.wait_for(first.joined.wait(), 60)
        tasks.append(asyncio.create_task(second.run(stop)))
        await asyncio.wait_for(second.joined.wait(), 60)
        await publish(broker.bootstrap_servers, config.vaults.facts_topic,
                      fact_records([u for u in updates if u.ts > half]))
        await wait_for(lambda: group_caught_up(broker.bootstrap_servers, "vaults-two",
                                               config.vaults.facts_topic),
                       90, "the group to commit every fact")
        async with TopicReader(broker.bootstrap_servers, config.vaults.ratings_topic) as out:
            await out.until(lambda r: len({x.value for x in r}) >= len(expected), 60,
                            "every record")
            while await out.poll(500):
                pass
            values = [r.value for r in out.records]
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
    assert set(values) == set(expected)
    assert per_vault(values) == per_vault(expected)
    assert first.stats.facts > 0 and second.stats.facts > 0  # both did work
