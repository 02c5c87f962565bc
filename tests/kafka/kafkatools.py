"""Test helpers: publish ticks, read topics back, compute what the engine says in-process."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from monitor.config import Config, KafkaConfig
from monitor.engine import Engine
from monitor.kafka.readall import READER_FETCH_WAIT_MS, true_end_offsets
from monitor.records import TierChangeEvent
from monitor.tickfiles import BadRow, read_file
from monitor.ticks import Tick, encode_tick


def fast_kafka(bootstrap: str, **overrides: Any) -> KafkaConfig:
    """Small timeouts so tests notice outages and rebalances quickly."""
    base: dict[str, Any] = dict(
        bootstrap_servers=bootstrap, partitions=4, batch_timeout_ms=100,
        checkpoint_interval_seconds=0.5, session_timeout_ms=6000, heartbeat_interval_ms=1000,
        request_timeout_ms=10000, retry_backoff_seconds=0.2, retry_backoff_max_seconds=2.0,
        live_clock_interval_seconds=1.0, ready_stall_seconds=6.0,
        # States of quiet tokens within a second (and the busy ones every 32 ticks, the
        # default), so the group's offset reaches the end soon after the last tick.
        state_max_age_seconds=1.0,
    )
    base.update(overrides)
    return KafkaConfig(**base)


def env_for(kafka: KafkaConfig) -> dict[str, str]:
    """The same KafkaConfig as DEPEG_KAFKA__* variables, for a subprocess."""
    env = {"DEPEG_METRICS__PORT": "0", "DEPEG_LOGGING__FORMAT": "json"}
    for name, value in msgspec.structs.asdict(kafka).items():
        env[f"DEPEG_KAFKA__{name.upper()}"] = str(value).lower() if isinstance(value, bool) \
            else str(value)
    return env


def load_ticks(*paths: Path) -> list[Tick]:
    ticks = [row for path in paths for row in read_file(path) if not isinstance(row, BadRow)]
    ticks.sort(key=lambda t: t.ts)
    return ticks


def engine_transitions(ticks: Iterable[Tick],
                       config: Config | None = None) -> list[TierChangeEvent]:
    """What the daemon must publish: the engine fed the same ticks in the same order.

    No ``flush()``: a live stream never ends, so ticks inside the lateness window at its
    end stay buffered (the replay command flushes them; tests assert that changes nothing).
    """
    engine = Engine((config or Config()).model)
    out: list[TierChangeEvent] = []
    for tick in ticks:
        out.extend(o for o in engine.process(tick) if isinstance(o, TierChangeEvent))
    return out


def by_partition(records: list[Any]) -> dict[int, list[tuple[bytes, bytes]]]:
    """Consumed records as (key, value) per partition, each in offset order: what two
    producers' outputs are compared by (the order across partitions is not defined)."""
    out: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
    for rec in sorted(records, key=lambda r: (r.partition, r.offset)):
        out[rec.partition].append((rec.key, rec.value))
    return dict(out)


def partition_of(key: str, partitions: int) -> int:
    all_parts = list(range(partitions))
    return int(DefaultPartitioner()(key.encode(), all_parts, all_parts))


def tick_records(ticks: Iterable[Tick]) -> list[tuple[bytes | None, bytes]]:
    return [(t.key.encode(), encode_tick(t)) for t in ticks]


class TopicReader:
    """Reads a whole topic (all partitions, no group) and keeps everything read so far."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.records: list[Any] = []
        self._consumer: AIOKafkaConsumer | None = None

    async def __aenter__(self) -> TopicReader:
        self._consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=None,
                                          enable_auto_commit=False,
                                          auto_offset_reset="earliest",
                                          fetch_max_bytes=64 * 1024 * 1024,
                                          max_partition_fetch_bytes=16 * 1024 * 1024)
        await self._consumer.start()
        await self._consumer.topics()  # refresh metadata
        parts = self._consumer.partitions_for_topic(self.topic) or set()
        tps = [TopicPartition(self.topic, p) for p in sorted(parts)]
        self._consumer.assign(tps)
        await self._consumer.seek_to_beginning(*tps)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._consumer is not None
        await self._consumer.stop()

    async def poll(self, timeout_ms: int = 200) -> list[Any]:
        assert self._consumer is not None
        batch = await self._consumer.getmany(timeout_ms=timeout_ms, max_records=10000)
        new = [r for recs in batch.values() for r in recs]
        self.records.extend(new)
        return new

    async def to_end(self, within: float) -> list[Any]:
        """Everything on the topic when called: reads every partition up to the end
        offset the broker gives for it now (a record written twice anywhere is seen)."""
        assert self._consumer is not None
        consumer = self._consumer
        ends = await consumer.end_offsets(sorted(consumer.assignment()))
        deadline = time.monotonic() + within
        while True:
            behind = [tp for tp, end in ends.items() if await consumer.position(tp) < end]
            if not behind:
                return self.records
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {within}s reading {self.topic} to its"
                                     f" end ({len(self.records)} records read)")
            await self.poll()

    async def until(self, done: Callable[[list[Any]], bool], within: float,
                    what: str = "condition") -> list[Any]:
        deadline = time.monotonic() + within
        while not done(self.records):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {within}s waiting for {what} on "
                                     f"{self.topic} ({len(self.records)} records read)")
            await self.poll()
        return self.records


def log_events(path: Path) -> list[dict[str, Any]]:
    """The JSON log lines of a spawned process (DEPEG_LOGGING__FORMAT=json), in order."""
    import json

    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


async def wait_for(cond: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    """Poll ``cond`` until true (an eventual condition across processes), or fail."""
    deadline = time.monotonic() + within
    while not await cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.2)


async def group_caught_up(bootstrap: str, group: str, topic: str) -> bool:
    """True when the group's committed offsets reach the TRUE end of every partition
    (the fetch high watermark: ``end_offsets`` stops short on the embedded broker)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                enable_auto_commit=False, auto_offset_reset="earliest",
                                fetch_max_wait_ms=READER_FETCH_WAIT_MS)
    await consumer.start()
    try:
        await consumer.topics()
        parts = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        ends = await true_end_offsets(consumer, tps)
        for tp in tps:
            committed = await consumer.committed(tp)
            if ends[tp] > 0 and (committed is None or committed < ends[tp]):
                return False
        return True
    finally:
        await consumer.stop()


def check_union(records: list[Any], expected: list[TierChangeEvent]) -> None:
    """Every expected transition was published; nothing else; duplicates are identical."""
    by_id: dict[str, bytes] = {}
    for rec in records:
        event = msgspec.json.decode(rec.value, type=TierChangeEvent)
        previous = by_id.setdefault(event.event_id, rec.value)
        assert previous == rec.value, f"two different records share id {event.event_id}"
    expected_ids = {e.event_id for e in expected}
    missing = expected_ids - by_id.keys()
    extra = by_id.keys() - expected_ids
    assert not missing, f"{len(missing)} transitions never published"
    assert not extra, f"{len(extra)} published transitions the engine does not make"


def engine_outputs(ticks: Iterable[Tick], config: Config | None = None) -> tuple[
        list[TierChangeEvent], int]:
    """(transitions, number of rating snapshots) the engine makes for ``ticks``."""
    engine = Engine((config or Config()).model)
    events: list[TierChangeEvent] = []
    ratings = 0
    for tick in ticks:
        for out in engine.process(tick):
            if isinstance(out, TierChangeEvent):
                events.append(out)
            else:
                ratings += 1
    return events, ratings


class MonitorProcess:
    """``depeg-monitor monitor`` in a child process, JSON logs in a file."""

    def __init__(self, kafka: KafkaConfig, log_path: Path, command: str = "monitor",
                 extra_env: dict[str, str] | None = None) -> None:
        import os
        import subprocess
        import sys

        self.log_path = log_path
        env = {**os.environ, **env_for(kafka), **(extra_env or {})}
        self._log = log_path.open("ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "monitor", command], env=env,
                                     stdout=self._log, stderr=subprocess.STDOUT)

    def events(self, name: str) -> list[dict[str, Any]]:
        import json

        found = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            if f'"{name}"' in line:
                try:
                    found.append(json.loads(line))
                except ValueError:
                    continue
        return [e for e in found if e.get("event") == name]

    def partitions(self) -> set[int]:
        """Partitions held now, from the assignment/revocation log lines."""
        held: set[int] = set()
        import json

        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("event") == "monitor.partitions_assigned":
                held |= set(e["partitions"])
            elif e.get("event") == "monitor.partitions_revoked":
                held -= set(e["partitions"])
        return held

    def kill9(self) -> None:
        import signal

        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return int(self.proc.returncode)
