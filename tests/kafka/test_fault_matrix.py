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
from monitor.testing import publish
from monitor.ticks import Tick

from . import replaytruth
from .faultrun import Progress, finish, matrix_files, published
from .kafkatools import (
    MonitorProcess,
    fast_kafka,
    load_ticks,
    tick_records,
    wait_for,
)

pytestmark = [pytest.mark.broker, pytest.mark.data]


#: The ticks, replay's truth and what is owed.
MatrixInput = tuple[list[Tick], dict[replaytruth.Identity, bytes], set[replaytruth.Identity]]


@pytest.fixture(scope="module")
def matrix_input(tmp_path_factory: pytest.TempPathFactory) -> MatrixInput:
    """The input files (written to a temp dir), their ticks, replay's truth, what is owed."""
    out = tmp_path_factory.mktemp("matrix")
    files = matrix_files(out)
    ticks = load_ticks(*files)
    truth = replaytruth.replay(files, out)
    return ticks, truth, replaytruth.owed(truth, ticks)


Scenario = Callable[[EmbeddedBroker, KafkaConfig, Path, Progress], Awaitable[None]]


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
    await finish(broker, kafka, b)


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
    await finish(broker, kafka, c)


async def two_instances_one_killed(broker: EmbeddedBroker, kafka: KafkaConfig, tmp: Path,
                                   progress: Progress) -> None:
    a, b = _start(kafka, tmp, "a"), _start(kafka, tmp, "b")
    try:
        await progress.reached(0.5)
        a.kill9()
        a.stop()
        await finish(broker, kafka, b)
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
        await finish(broker, kafka, a)
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
    await finish(broker, kafka, a)


SCENARIOS: dict[str, Scenario] = {
    "clean_restart": clean_restart,
    "kill9_twice": kill9_twice,
    "two_instances_one_killed": two_instances_one_killed,
    "scale_1_3_1": scale_1_3_1,
    "broker_paused": broker_paused,
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_every_published_byte_matches_replay(
        scenario: str, broker: EmbeddedBroker, tmp_path: Path,
        matrix_input: MatrixInput) -> None:
    ticks, truth, owed = matrix_input
    # Small batches so the faults land mid-stream; short sessions so a killed member's
    # partitions move on quickly (a spurious rebalance under load is one more fault).
    kafka = fast_kafka(broker.bootstrap_servers, batch_max_records=200, partitions=4,
                       session_timeout_ms=4000, heartbeat_interval_ms=800)
    owed_ratings = sum(1 for kind, _, _ in owed if kind == "rating")
    await ensure_topics(kafka)
    await publish(broker.bootstrap_servers, kafka.ticks_topic, tick_records(ticks))
    await SCENARIOS[scenario](broker, kafka, tmp_path, Progress(broker, kafka, owed_ratings))

    verdict = replaytruth.judge(await published(broker, kafka), truth, owed)
    verdict.assert_exact()
    assert any(kind == "tier_change" for kind, _, _ in owed), "the input must change tiers"
