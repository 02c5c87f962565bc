"""After every fault, exactly the truth: real data (the SVB weekend of USDC)
plus simulated tokens, through real ``depeg-monitor monitor`` processes on the real broker,
under clean restarts, kill -9, a killed group member, scaling 1 -> 3 -> 1 and a frozen
broker. Every published rating and tier change is compared byte for byte with
``depeg-monitor replay`` of the same files: 0 lost, 0 spurious, 0 differing; duplicates
only as byte-identical copies (``replaytruth.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from monitor.config import KafkaConfig
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics
from monitor.tickfiles import BadRow, read_file
from monitor.ticks import Tick
from producers.csvout import write_ticks_file
from producers.synthetic import generate, make_tokens
from tests.conftest import data_file

from . import replaytruth
from .kafkatools import (
    MonitorProcess,
    TopicReader,
    fast_kafka,
    group_caught_up,
    load_ticks,
    produce,
    tick_records,
    wait_for,
)

pytestmark = [pytest.mark.broker, pytest.mark.data]

#: 2023-03-10 12:00 to 2023-03-12 00:00 UTC: USDC's fall to 0.88 after SVB.
SVB_DAYS = (1678449600.0, 1678579200.0)


@pytest.fixture(scope="module")
def matrix_input(tmp_path_factory: pytest.TempPathFactory) -> tuple[
        list[Tick], dict[replaytruth.Identity, bytes], set[replaytruth.Identity]]:
    """The input files (written to a temp dir), their ticks, replay's truth, what is owed."""
    out = tmp_path_factory.mktemp("matrix")
    files = matrix_files(out)
    ticks = load_ticks(*files)
    truth = replaytruth.replay(files, out)
    return ticks, truth, replaytruth.owed(truth, ticks)


def matrix_files(out: Path) -> list[Path]:
    """The SVB weekend of USDC plus 12 simulated tokens, as tick files in ``out``."""
    usdc = out / "usdc-svb-weekend.csv"
    source = data_file("ticks/usdc_2023-03_binanceus_1m.csv")
    week = [t for t in read_file(source)
            if not isinstance(t, BadRow) and SVB_DAYS[0] <= t.ts < SVB_DAYS[1]]
    write_ticks_file(week, usdc)
    simulated = out / "simulated.csv"
    write_ticks_file(generate(make_tokens(12, seed=11), seed=11, start=SVB_DAYS[0],
                              interval=600.0, duration=SVB_DAYS[1] - SVB_DAYS[0]), simulated)
    return [usdc, simulated]


Scenario = Callable[[EmbeddedBroker, KafkaConfig, Path, "Progress"], Awaitable[None]]


class Progress:
    """Waits until a fraction of the owed rating snapshots were published."""

    def __init__(self, broker: EmbeddedBroker, kafka: KafkaConfig, owed_ratings: int) -> None:
        self.bootstrap = broker.bootstrap_servers
        self.topic = kafka.ratings_topic
        self.total = owed_ratings

    async def reached(self, fraction: float) -> None:
        async with TopicReader(self.bootstrap, self.topic) as ratings:
            await ratings.until(lambda r: len(r) >= fraction * self.total, 120,
                                f"{fraction:.0%} of the ratings")


async def _assigned(*procs: MonitorProcess) -> bool:
    for p in procs:
        assert p.proc.poll() is None, p.log_path.read_text()[-3000:]
    return all(p.events("monitor.partitions_assigned") for p in procs)


def _start(kafka: KafkaConfig, tmp: Path, name: str) -> MonitorProcess:
    return MonitorProcess(kafka, tmp / f"{name}.log")


async def clean_restart(broker: EmbeddedBroker, kafka: KafkaConfig, tmp: Path,
                        progress: Progress) -> None:
    a = _start(kafka, tmp, "a")
    await progress.reached(0.4)
    assert a.stop() == 0
    b = _start(kafka, tmp, "b")
    await _finish(broker, kafka, b)


async def kill9_twice(broker: EmbeddedBroker, kafka: KafkaConfig, tmp: Path,
                      progress: Progress) -> None:
    a = _start(kafka, tmp, "a")
    await progress.reached(0.3)
    a.kill9()
    a.stop()
    b = _start(kafka, tmp, "b")
    await progress.reached(0.7)
    b.kill9()
    b.stop()
    c = _start(kafka, tmp, "c")
    await _finish(broker, kafka, c)


async def two_instances_one_killed(broker: EmbeddedBroker, kafka: KafkaConfig, tmp: Path,
                                   progress: Progress) -> None:
    a, b = _start(kafka, tmp, "a"), _start(kafka, tmp, "b")
    try:
        await progress.reached(0.5)
        a.kill9()
        a.stop()
        await _finish(broker, kafka, b)
    finally:
        a.stop()


async def scale_1_3_1(broker: EmbeddedBroker, kafka: KafkaConfig, tmp: Path,
                      progress: Progress) -> None:
    a = _start(kafka, tmp, "a")
    extra: list[MonitorProcess] = []
    try:
        await progress.reached(0.25)
        extra = [_start(kafka, tmp, "b"), _start(kafka, tmp, "c")]
        await wait_for(lambda: _assigned(*extra), 60, "the two new instances assigned")
        await progress.reached(0.6)
        for p in extra:
            assert p.stop() == 0
        await _finish(broker, kafka, a)
    finally:
        for p in extra:
            p.stop()


async def broker_paused(broker: EmbeddedBroker, kafka: KafkaConfig, tmp: Path,
                        progress: Progress) -> None:
    a = _start(kafka, tmp, "a")
    await progress.reached(0.4)
    broker.pause()
    try:
        await asyncio.sleep(8)  # the outage itself (not a synchronisation)
    finally:
        broker.resume()
    await _finish(broker, kafka, a)


async def _finish(broker: EmbeddedBroker, kafka: KafkaConfig, last: MonitorProcess) -> None:
    try:
        await wait_for(lambda: group_caught_up(broker.bootstrap_servers, kafka.monitor_group,
                                               kafka.ticks_topic), 180,
                       "the group to commit every tick")
    finally:
        assert last.stop() == 0, last.log_path.read_text()[-3000:]


SCENARIOS: dict[str, Scenario] = {
    "clean_restart": clean_restart,
    "kill9_twice": kill9_twice,
    "two_instances_one_killed": two_instances_one_killed,
    "scale_1_3_1": scale_1_3_1,
    "broker_paused": broker_paused,
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_every_published_byte_matches_replay(scenario: str, broker, tmp_path: Path,
                                                   matrix_input) -> None:
    ticks, truth, owed = matrix_input
    # Small batches so the faults land mid-stream; short sessions so a killed member's
    # partitions move on quickly (a spurious rebalance under load is one more fault).
    kafka = fast_kafka(broker.bootstrap_servers, batch_max_records=200, partitions=4,
                       session_timeout_ms=4000, heartbeat_interval_ms=800)
    owed_ratings = sum(1 for kind, _, _ in owed if kind == "rating")
    await ensure_topics(kafka)
    await produce(broker.bootstrap_servers, kafka.ticks_topic, tick_records(ticks))
    await SCENARIOS[scenario](broker, kafka, tmp_path, Progress(broker, kafka, owed_ratings))

    published: list[tuple[str, bytes]] = []
    for kind, topic in (("rating", kafka.ratings_topic),
                        ("tier_change", kafka.tier_changes_topic)):
        async with TopicReader(broker.bootstrap_servers, topic) as reader:
            while await reader.poll(1000):
                pass
            published += [(kind, rec.value) for rec in reader.records]
    verdict = replaytruth.judge(published, truth, owed)
    verdict.assert_exact()
    assert any(kind == "tier_change" for kind, _, _ in owed), "the input must change tiers"
