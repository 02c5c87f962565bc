"""The embedded broker's journal: what a memory-only Tansu would lose, kept in SQLite.

``depeg-monitor run`` without a configured cluster starts Tansu, which keeps everything in
memory. So that a restart of ``run`` (SIGTERM or kill -9) continues where it stopped, the
journal copies every record of the monitor's topics (ticks, state, ratings, tier changes,
dead letters) and of the vault daemon's (facts, state, ratings, dead letters), and the
committed offsets of the consumer groups into
``<data dir>/embedded-broker.sqlite``; on the next start, before any service runs, the
fresh broker is seeded with them: the same records at the same offsets of the same
partitions, and the same committed offsets. Every consumer (monitor, delivery, store)
then resumes exactly as after a restart on a durable Kafka cluster.

One journal cycle, every ``interval`` seconds and once more after the services stopped,
copies in this order and commits it as ONE SQLite transaction:

1. the groups' committed offsets (they point at ticks and outputs acknowledged earlier);
2. the state topic (its records cover tick offsets acknowledged earlier);
3. the output topics; 4. the ticks topic.

Read in that order, each item only refers to things read after it, so whatever cycle was
the last to complete before a kill -9 is self-consistent: the monitor's committed offsets
and restored states never point past the ticks the journal holds, and every output of a
committed tick is there. What a kill -9 can lose is the last interval's tail (records the
broker acknowledged after the last cycle): producers must resend those.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition

from ..config import KafkaConfig
from ..logs import get_logger
from ..vaults.config import VaultsConfig
from .closing import close_bounded
from .readall import read_to_end
from .topics import admin_client, make_consumer, make_producer, make_reader, partition_counts

log = get_logger(__name__)

FILE_NAME = "embedded-broker.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS journal_records (
    topic TEXT NOT NULL, part INTEGER NOT NULL, off INTEGER NOT NULL,
    key BLOB, value BLOB, headers BLOB NOT NULL, timestamp_ms INTEGER NOT NULL,
    PRIMARY KEY (topic, part, off));
CREATE TABLE IF NOT EXISTS journal_offsets (
    group_id TEXT NOT NULL, topic TEXT NOT NULL, part INTEGER NOT NULL, off INTEGER NOT NULL,
    PRIMARY KEY (group_id, topic, part));
"""

Row = tuple[str, int, int, bytes | None, bytes | None, bytes, int]
_headers = msgspec.msgpack.Encoder()
_headers_decoder = msgspec.msgpack.Decoder(list[tuple[str, bytes]])


class JournalError(RuntimeError):
    """The journal cannot be replayed into the broker as it was."""


def topics_in_order(k: KafkaConfig, v: VaultsConfig | None = None) -> list[str]:
    """State first, outputs next, inputs last (see the module docstring); with ``v`` the
    vault daemon's topics too, in the same roles (without them a restart of ``run`` lost
    every vault: facts, states and the group's offsets)."""
    if v is None:
        return [k.state_topic, k.ratings_topic, k.tier_changes_topic, k.dlq_topic,
                k.ticks_topic]
    return [k.state_topic, v.state_topic, k.ratings_topic, k.tier_changes_topic, k.dlq_topic,
            v.ratings_topic, v.dlq_topic, k.ticks_topic, v.facts_topic]


class JournalStore:
    """The SQLite side (stdlib sqlite3, called through ``asyncio.to_thread``)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    def save(self, rows: list[Row], offsets: dict[tuple[str, str, int], int]) -> None:
        with self._db:  # one transaction: a cycle is stored whole or not at all
            self._db.executemany(
                "INSERT OR IGNORE INTO journal_records VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            self._db.executemany(
                "INSERT INTO journal_offsets VALUES (?, ?, ?, ?) ON CONFLICT "
                "(group_id, topic, part) DO UPDATE SET off = excluded.off",
                [(g, t, p, o) for (g, t, p), o in offsets.items()])

    def count(self) -> int:
        """Records held: what the next start puts back (logged by ``run.journal_saved``)."""
        return int(self._db.execute("SELECT COUNT(*) FROM journal_records").fetchone()[0])

    def next_offsets(self) -> dict[tuple[str, int], int]:
        cur = self._db.execute(
            "SELECT topic, part, MAX(off) + 1 FROM journal_records GROUP BY topic, part")
        return {(t, p): int(n) for t, p, n in cur}

    def offsets(self) -> dict[tuple[str, str, int], int]:
        cur = self._db.execute("SELECT group_id, topic, part, off FROM journal_offsets")
        return {(g, t, p): int(o) for g, t, p, o in cur}

    def all_records(self, topic: str, part: int) -> list[tuple[int, Any, Any, bytes, int]]:
        cur = self._db.execute(
            "SELECT off, key, value, headers, timestamp_ms FROM journal_records "
            "WHERE topic = ? AND part = ? ORDER BY off", (topic, part))
        return list(cur)


class Journal:
    """Copies the embedded broker into a :class:`JournalStore`; seeds a fresh one back."""

    def __init__(self, kafka: KafkaConfig, path: Path, groups: dict[str, list[str]],
                 topics: list[str] | None = None) -> None:
        """``groups``: consumer group -> the topics whose offsets it commits; ``topics``:
        what to copy, in :func:`topics_in_order` order (default: the monitor's)."""
        self.kafka = kafka
        self.topics = topics if topics is not None else topics_in_order(kafka)
        self.store = JournalStore(path)
        self.groups = groups
        self._next = self.store.next_offsets()
        #: Records copied by this process's cycles (the final one included).
        self.copied = 0
        # The cycle's clients, kept from one cycle to the next: a cycle runs every second
        # or so, and starting an admin client, a reader and a consumer per group each
        # time (connections, metadata) cost more CPU than an idle cycle's reads, on both
        # sides. Dropped after an error (made again by the next cycle) and by aclose().
        self._admin: Any = None
        self._reader: AIOKafkaConsumer | None = None
        self._offset_readers: dict[str, AIOKafkaConsumer] = {}

    # -- seeding a fresh broker ---------------------------------------------------------
    async def seed(self) -> int:
        """Put every journaled record and committed offset back; returns the record count.

        Call on a broker whose topics were just created (empty)."""
        k = self.kafka
        producer = make_producer(k, linger_ms=20, max_batch_size=1024 * 1024)
        await producer.start()
        count = 0
        try:
            for topic, part in sorted(self._next):
                futures = []
                expected = []
                stored = await asyncio.to_thread(self.store.all_records, topic, part)
                for off, key, value, headers, ts in stored:
                    futures.append(await producer.send(
                        topic, value, key=key, partition=part, timestamp_ms=ts,
                        headers=_headers_decoder.decode(headers) or None))
                    expected.append(off)
                for off, meta in zip(expected, await asyncio.gather(*futures), strict=True):
                    if meta.offset != off:
                        raise JournalError(
                            f"{topic}[{part}]: journaled offset {off} came back as "
                            f"{meta.offset}; the broker was not empty")
                count += len(expected)
        finally:
            await close_bounded(producer.stop(), "producer_stop", "journal.close_failed")
        await self._commit_offsets(await asyncio.to_thread(self.store.offsets))
        return count

    async def _commit_offsets(self, offsets: dict[tuple[str, str, int], int]) -> None:
        by_group: dict[str, dict[TopicPartition, int]] = {}
        for (group, topic, part), off in offsets.items():
            by_group.setdefault(group, {})[TopicPartition(topic, part)] = off
        for group, commits in by_group.items():
            consumer = make_consumer(self.kafka, group_id=group,
                                     client_id=f"{self.kafka.client_id}-journal")
            await consumer.start()
            try:
                consumer.assign(list(commits))
                await consumer.commit(commits)
            finally:
                await close_bounded(consumer.stop(), "consumer_stop", "journal.close_failed")

    # -- copying ------------------------------------------------------------------------
    async def cycle(self, *, whole: bool = False) -> int:
        """Copy what is new since the last cycle; returns the number of records. A cycle
        reads only the topics whose end offsets moved past what it holds (one request for
        all of them: an idle ``run`` spent ~25 ms of CPU a cycle reading nine topics to
        their end to find nothing); ``whole`` reads every topic to its end regardless (the
        final cycle after the services stopped: nothing may hinge on that answer)."""
        if whole:
            # Once, after the services stopped: fresh clients, so no state left by an
            # earlier cycle (a stale metadata view, a half-done request) decides it.
            await self.close_clients()
        try:
            return await self._cycle(whole)
        except BaseException:
            # Perhaps broken, or cancelled halfway through a request or a start (a
            # client kept after a cancelled start has no broker to ask: "Unable to
            # update metadata from []"): the next cycle makes new ones.
            await self.close_clients()
            raise

    async def _cycle(self, whole: bool) -> int:
        k = self.kafka
        offsets = await self._group_offsets()
        # Each client is kept only once started: a start that failed or was cancelled
        # must not leave a client the next cycle takes for a working one.
        if self._admin is None:
            admin = admin_client(k)
            await _started(admin.start(), admin.close)
            self._admin = admin
        counts = await partition_counts(self._admin, self.topics)
        if self._reader is None:
            reader = make_reader(k, f"{k.client_id}-journal")
            await _started(reader.start(), reader.stop)
            self._reader = reader
        moved = set(self.topics) if whole else await self._moved(self._reader, counts)
        rows: list[Row] = []
        try:
            for topic in self.topics:
                if topic in moved:
                    rows += await self._read_topic(self._reader, topic, counts[topic])
        finally:
            self._reader.assign([])  # no fetches between cycles
        await asyncio.to_thread(self.store.save, rows, offsets)
        for topic, part, off, *_ in rows:
            self._next[(topic, part)] = max(self._next.get((topic, part), 0), off + 1)
        self.copied += len(rows)
        return len(rows)

    async def _group_offsets(self) -> dict[tuple[str, str, int], int]:
        """Committed offsets through a consumer of each group that never joins it (the
        admin client's OffsetFetch does not parse Tansu's answer)."""
        found: dict[tuple[str, str, int], int] = {}
        for group, topics in self.groups.items():
            consumer = self._offset_readers.get(group)
            if consumer is None:
                consumer = make_consumer(self.kafka, group_id=group,
                                         client_id=f"{self.kafka.client_id}-journal")
                await _started(consumer.start(), consumer.stop)
                self._offset_readers[group] = consumer
            await consumer.topics()
            for topic in topics:
                for p in sorted(consumer.partitions_for_topic(topic) or []):
                    offset = await consumer.committed(TopicPartition(topic, p))
                    if offset is not None and offset >= 0:
                        found[(group, topic, p)] = int(offset)
        return found

    async def _moved(self, reader: AIOKafkaConsumer, counts: dict[str, int]) -> set[str]:
        """The topics with a record past what the journal holds. ``end_offsets`` is a
        lower bound of the true end on Tansu (readall.py: the start of the last record
        batch plus one), but it is past the journal's next offset exactly when a batch
        begins at or after it, i.e. when there is a record the journal lacks."""
        tps = [TopicPartition(t, p) for t in self.topics for p in range(counts[t])]
        if not tps:
            return set()
        ends = await reader.end_offsets(tps)
        return {tp.topic for tp in tps if ends[tp] > self._next.get((tp.topic, tp.partition), 0)}

    async def _read_topic(self, reader: AIOKafkaConsumer, topic: str,
                          partitions: int) -> list[Row]:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        if not tps:
            return []
        reader.assign(tps)
        for tp in tps:
            reader.seek(tp, self._next.get((topic, tp.partition), 0))
        rows: list[Row] = []

        def keep(tp: TopicPartition, records: list[Any]) -> None:
            rows.extend((topic, tp.partition, r.offset, r.key, r.value,
                         _headers.encode(list(r.headers or [])), r.timestamp)
                        for r in records)

        await read_to_end(reader, tps, keep, stall_seconds=30.0)
        return rows

    async def close_clients(self) -> None:
        """Stop the clients the cycles keep (each bounded; the next cycle makes new ones)."""
        admin, reader, offset_readers = self._admin, self._reader, self._offset_readers
        self._admin, self._reader, self._offset_readers = None, None, {}
        if admin is not None:
            await close_bounded(admin.close(), "admin_close", "journal.close_failed")
        if reader is not None:
            await close_bounded(reader.stop(), "reader_stop", "journal.close_failed")
        for consumer in offset_readers.values():
            await close_bounded(consumer.stop(), "consumer_stop", "journal.close_failed")

    async def aclose(self) -> None:
        """Stop the cycles' clients, then close the store."""
        try:
            await self.close_clients()
        finally:
            self.close()

    def close(self) -> None:
        self.store.close()


async def _started(start: Awaitable[Any], stop: Callable[[], Awaitable[Any]]) -> None:
    """Await a client's ``start``; if it fails or is cancelled, stop what it opened."""
    try:
        await start
    except BaseException:
        await close_bounded(stop(), "start_undone", "journal.close_failed")
        raise
