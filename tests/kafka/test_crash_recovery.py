"""kill -9 in the middle of the stream: a restart (or the surviving instance of two)
continues from the state topic; the union of published transitions is exactly the engine's
(duplicates allowed only as byte-identical records with the same event id)."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.config import KafkaConfig
from monitor.kafka.embedded import EmbeddedBroker
from monitor.records import TierChangeEvent
from monitor.testing import publish
from tests.conftest import data_file

from .kafkatools import (
    MonitorProcess,
    TopicReader,
    check_union,
    engine_outputs,
    fast_kafka,
    group_caught_up,
    load_ticks,
    partition_of,
    tick_records,
    wait_for,
)

pytestmark = [pytest.mark.broker, pytest.mark.data]

USDC = "eth:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
BUSD = "eth:0x4fabb145d64652a948d72533023f6e7a623c7c53"


async def _kill_when_mid_stream(bootstrap: str, topic: str, total_ratings: int,
                                victim: MonitorProcess, fraction: float,
                                state_topic: str | None = None) -> int:
    """kill -9 ``victim`` once ``fraction`` of all rating snapshots were published (and,
    with ``state_topic``, once it wrote a token state there: a monitor that ran through
    the ticks before its first checkpoint would leave nothing to restore)."""
    if state_topic is not None:
        async with TopicReader(bootstrap, state_topic) as states:
            await states.until(lambda r: len(r) >= 1, 120, "a token state")
    async with TopicReader(bootstrap, topic) as ratings:
        await ratings.until(lambda r: len(r) >= fraction * total_ratings, 120,
                            f"{fraction:.0%} of the ratings")
        victim.kill9()
        return len(ratings.records)


async def _finish_and_check(bootstrap: str, kafka: KafkaConfig, expected: list[TierChangeEvent],
                            total_ratings: int) -> None:
    await wait_for(lambda: group_caught_up(bootstrap, kafka.monitor_group, kafka.ticks_topic),
                   120, "the group to commit every tick")
    async with TopicReader(bootstrap, kafka.tier_changes_topic) as changes:
        await changes.poll(500)
        await changes.poll(500)
        check_union(changes.records, expected)
    async with TopicReader(bootstrap, kafka.ratings_topic) as ratings:
        while await ratings.poll(500):
            pass
        assert len(ratings.records) >= total_ratings  # re-produced, never fewer


async def test_kill9_then_restart_publishes_every_transition_once(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    ticks = load_ticks(data_file("ticks/usdc_2023-03_binanceus_1m.csv"))
    expected, total_ratings = engine_outputs(ticks)
    kafka = fast_kafka(broker.bootstrap_servers, batch_max_records=300)
    first = MonitorProcess(kafka, tmp_path / "first.log")
    try:
        await wait_for(lambda: _has(first, "monitor.partitions_assigned"), 60, "assignment")
        # The stream's last 30 % comes after the kill: a monitor quicker than the test's
        # reader of its ratings could otherwise finish every tick before it is killed.
        records = tick_records(ticks)
        cut = len(records) * 7 // 10
        await publish(broker.bootstrap_servers, kafka.ticks_topic, records[:cut])
        # After the SVB weekend started (the first transitions are out), before the end.
        seen = await _kill_when_mid_stream(broker.bootstrap_servers, kafka.ratings_topic,
                                           total_ratings, first, 0.45, kafka.state_topic)
        assert seen < total_ratings
        await publish(broker.bootstrap_servers, kafka.ticks_topic, records[cut:])
        assert not await group_caught_up(broker.bootstrap_servers, kafka.monitor_group,
                                         kafka.ticks_topic)
    finally:
        first.stop()
    second = MonitorProcess(kafka, tmp_path / "second.log")
    try:
        await _finish_and_check(broker.bootstrap_servers, kafka, expected, total_ratings)
        restored = second.events("monitor.partitions_assigned")
        assert sum(e["restored_tokens"] for e in restored) == 1
    finally:
        assert second.stop() == 0


async def test_two_instances_survivor_takes_over_with_state(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    """A runs alone; B joins mid-stream (a clean rebalance: A checkpoints and hands over
    partitions with their state); later the owner of USDC is killed -9 and the other takes
    its partitions over from the state topic."""
    ticks = load_ticks(data_file("ticks/usdc_2023-03_binanceus_1m.csv"),
                       data_file("ticks/busd_2023-02_binance_1m.csv"))
    expected, total_ratings = engine_outputs(ticks)
    kafka = fast_kafka(broker.bootstrap_servers, batch_max_records=300, partitions=5)
    # 5 partitions: round-robin assignment puts USDC (4) and BUSD (3) on different members.
    usdc_p, busd_p = partition_of(USDC, 5), partition_of(BUSD, 5)
    a = MonitorProcess(kafka, tmp_path / "a.log")
    b: MonitorProcess | None = None
    try:
        await wait_for(lambda: _has(a, "monitor.partitions_assigned"), 60, "A assigned")
        await publish(broker.bootstrap_servers, kafka.ticks_topic, tick_records(ticks))
        async with TopicReader(broker.bootstrap_servers, kafka.ratings_topic) as ratings:
            await ratings.until(lambda r: len(r) >= 0.15 * total_ratings, 120, "15% ratings")
        b = MonitorProcess(kafka, tmp_path / "b.log")
        await wait_for(lambda: _split(a, b, usdc_p, busd_p), 60,
                       "the two tokens' partitions held by different instances")
        assert any(e["restored_tokens"] for e in b.events("monitor.partitions_assigned")), \
            "B must start from the state A handed over"
        victim, survivor = (a, b) if usdc_p in a.partitions() else (b, a)
        await _kill_when_mid_stream(broker.bootstrap_servers, kafka.ratings_topic,
                                    total_ratings, victim, 0.45)
        await _finish_and_check(broker.bootstrap_servers, kafka, expected, total_ratings)

        async def survivor_holds_all() -> bool:
            return survivor.partitions() == {0, 1, 2, 3, 4}

        # Its log line for the takeover can trail the work it logs: wait, do not race it.
        await wait_for(survivor_holds_all, 60, "the survivor to hold every partition")
        took_over = [e for e in survivor.events("monitor.partitions_assigned")
                     if usdc_p in e["partitions"]]
        assert took_over and took_over[-1]["restored_tokens"] >= 1
    finally:
        codes = [p.stop() for p in (a, b) if p is not None]
    assert 0 in codes  # the survivor stopped cleanly on SIGTERM


async def _has(proc: MonitorProcess, event: str) -> bool:
    assert proc.proc.poll() is None, proc.log_path.read_text()[-3000:]
    return bool(proc.events(event))


async def _split(a: MonitorProcess, b: MonitorProcess, p1: int, p2: int) -> bool:
    for p in (a, b):
        assert p.proc.poll() is None, p.log_path.read_text()[-3000:]
    held_a, held_b = a.partitions(), b.partitions()
    return bool(held_a and held_b) and (
        (p1 in held_a and p2 in held_b) or (p1 in held_b and p2 in held_a))
