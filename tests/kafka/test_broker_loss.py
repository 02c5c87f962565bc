"""The broker comes back EMPTY (stopped, and a new memory-only one started on the same
port): the monitor notices, says so as an error and exits non-zero instead of carrying on
from nothing; producers report the records the broker acknowledged and then lost; a stop
always ends within the grace period, and /healthz reports a stuck loop."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from monitor.config import Config
from monitor.kafka.embedded import EmbeddedBroker
from monitor.testing import publish
from monitor.ticks import Tick
from producers.kafka_out import ProduceError, TickSender, open_sender
from producers.synthetic import generate, make_tokens

from .kafkatools import (
    MonitorProcess,
    TopicReader,
    fast_kafka,
    group_caught_up,
    tick_records,
    wait_for,
)

pytestmark = [pytest.mark.broker]


def _ticks(tokens: int, hours: float, start: float = 1_700_000_000.0) -> list[Tick]:
    return list(generate(make_tokens(tokens, seed=3), seed=3, start=start, interval=60.0,
                         duration=hours * 3600))


async def _exited(proc: MonitorProcess) -> bool:
    return proc.proc.poll() is not None


async def test_monitor_exits_with_an_error_when_the_broker_comes_back_empty(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    kafka = fast_kafka(broker.bootstrap_servers, shutdown_grace_seconds=5.0)
    monitor = MonitorProcess(kafka, tmp_path / "monitor.log")
    try:
        await wait_for(lambda: _has(monitor, "monitor.partitions_assigned"), 60, "assignment")
        ticks = _ticks(10, 3)
        await publish(broker.bootstrap_servers, kafka.ticks_topic, tick_records(ticks))
        await wait_for(lambda: group_caught_up(broker.bootstrap_servers, kafka.monitor_group,
                                               kafka.ticks_topic), 60, "every tick committed")
        broker.stop()
        broker.start()  # same port, nothing in it
        # A producer feeds the new broker (its topics are created again, offsets from 0).
        await publish(broker.bootstrap_servers, kafka.ticks_topic,
                      tick_records(_ticks(10, 0.5, start=1_700_100_000.0)))
        await wait_for(lambda: _exited(monitor), 90, "the monitor to exit")
        assert monitor.proc.returncode == 3
        lost = monitor.events("monitor.broker_lost")
        assert lost and lost[0]["level"] == "error", monitor.log_path.read_text()[-3000:]
        assert "lost" in lost[0]["error"]
    finally:
        monitor.stop()


async def test_producer_reports_records_the_broker_lost(broker: EmbeddedBroker) -> None:
    config = Config(kafka=fast_kafka(broker.bootstrap_servers))
    first, second = _ticks(5, 2), _ticks(5, 1, start=1_700_100_000.0)

    async def acknowledged_then_restart(ticks: list[Tick]) -> TickSender:
        """A sender whose ``ticks`` the broker acknowledged before it restarted empty."""
        sender = await open_sender(broker.bootstrap_servers, config.kafka)
        for tick in ticks:
            await sender.send(tick)
        await sender.flush()
        broker.stop()
        broker.start()
        return sender

    # Acknowledged, then the broker restarts empty before the sender closes.
    sender = await acknowledged_then_restart(first)
    with pytest.raises(ProduceError, match="lost"):
        await sender.close()

    # The broker restarts empty while the sender is still sending: offsets start again.
    sender = await acknowledged_then_restart(first)
    for tick in second:
        await sender.send(tick)
    with pytest.raises(ProduceError, match="lost"):
        await sender.close()

    # Control: nothing lost, nothing reported. (On a fresh broker: records sent to a
    # topic this Tansu never created leave debris that fails later produces with
    # UnknownError, which the sender reports as well.)
    broker.stop()
    broker.start()
    sender = await open_sender(broker.bootstrap_servers, config.kafka)
    for tick in second:
        await sender.send(tick)
    await sender.close()


async def test_sigterm_ends_within_grace_and_healthz_reports_a_stuck_loop(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    """The broker freezes (SIGSTOP) under load: the loop hangs in a publish, /healthz says
    so, and SIGTERM still ends the process within the grace period."""
    grace = 4.0
    kafka = fast_kafka(broker.bootstrap_servers, shutdown_grace_seconds=grace,
                       liveness_stall_seconds=3.0, batch_max_records=500)
    monitor = MonitorProcess(kafka, tmp_path / "monitor.log")
    try:
        await wait_for(lambda: _has(monitor, "monitor.partitions_assigned"), 60, "assignment")
        url = monitor.events("ops.listening")[0]["url"]

        async def healthy() -> bool:
            # Not at once: the loop's first iteration holds the group join and the
            # restore, which a loaded machine may stretch past the 3 s bound (by design a
            # hung rebalance fails /healthz too; the CI machine once read 503 here).
            return (await asyncio.to_thread(_healthz, url))[0] == 200

        await wait_for(healthy, 30, "/healthz 200 once the loop runs")
        # The broker must freeze while the monitor still owes it something: a monitor that
        # has published and checkpointed everything and is only fetching is not stuck. A
        # feeder produces ticks (event time moving on, so ratings keep coming) until the
        # first ratings are out, and freezes the broker as soon as the broker has
        # acknowledged one more small chunk: the monitor is still taking ticks then, and
        # every token it took a tick of since that token's last written state is due
        # within kafka.state_max_age_seconds (1 s here), so its next checkpoints write
        # states and commit offsets, which a frozen broker never answers. (One backlog
        # produced up front and a freeze after the first ratings was a race: a fast
        # monitor had published, checkpointed and committed all of it by then.)
        feed = generate(make_tokens(20, seed=3), seed=3, start=1_700_000_000.0, interval=60.0)
        async with TopicReader(broker.bootstrap_servers, kafka.ratings_topic) as ratings:
            producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all",
                                        linger_ms=5, enable_idempotence=False)
            await producer.start()
            try:
                await _feed_then_freeze(broker, producer, kafka.ticks_topic, feed, ratings)
                try:
                    async def stuck() -> bool:
                        return _healthz(url)[0] == 503

                    await wait_for(stuck, 60, "/healthz to report the stuck loop")
                    _, body = _healthz(url)
                    assert "stuck" in json.dumps(body)
                    started = time.monotonic()
                    monitor.proc.send_signal(signal.SIGTERM)
                    await wait_for(lambda: _exited(monitor), grace + 25, "the monitor to stop")
                    assert time.monotonic() - started < grace + 25
                finally:
                    broker.resume()
            finally:
                await producer.stop()
    finally:
        monitor.stop()


async def _feed_then_freeze(broker: EmbeddedBroker, producer: AIOKafkaProducer, topic: str,
                            feed: Iterator[Tick], ratings: TopicReader) -> None:
    """Produce ``feed`` in chunks (each acknowledged before the next) until ``ratings``
    holds a record, then one chunk more, and SIGSTOP the broker right after its ack."""
    deadline = time.monotonic() + 60
    while True:
        sent = [await producer.send(topic, value, key=key)
                for key, value in tick_records(islice(feed, 480))]
        await asyncio.gather(*sent)
        if ratings.records:
            broker.pause()
            return
        assert time.monotonic() < deadline, "no ratings within 60 s of feeding"
        await ratings.poll(timeout_ms=0)


def _healthz(url: str) -> tuple[int, object]:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def _has(proc: MonitorProcess, event: str) -> bool:
    assert proc.proc.poll() is None, proc.log_path.read_text()[-3000:]
    await asyncio.sleep(0)
    return bool(proc.events(event))
