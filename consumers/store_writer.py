"""The store writer: ``depeg.ratings`` and ``depeg.tier-changes`` into the ratings store,
``vaults.facts`` and ``vaults.ratings`` into the vault store (consumers/vault_store.py).

At-least-once with idempotent writes: a batch is written in one transaction and only then
are the offsets committed, so a crash re-delivers the batch and the upserts (token +
timestamp, ``event_id``) make the second write a no-op. A record that does not decode is
counted and logged with its topic, partition and offset, and skipped: it can never become
valid, and stopping the writer for it would stall the history of every other token.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import asyncpg
import msgspec
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.errors import KafkaError

from monitor import health, metrics
from monitor.chains import is_chain, normalize_address
from monitor.config import Config
from monitor.gcpolicy import service_started
from monitor.kafka.closing import close_bounded
from monitor.kafka.joining import start_unless_stopped
from monitor.kafka.topics import TopicError, ensure_topics, ensure_vault_topics, make_consumer
from monitor.logs import get_logger
from monitor.metrics import STORE_WRITE_ERRORS, STORE_WRITE_SECONDS, STORE_WRITES
from monitor.records import (
    RatingSnapshot,
    Tier,
    TierChangeEvent,
    decode_event,
    decode_snapshot,
    encode,
)
from monitor.services import Service, StartupError
from monitor.storage import connect
from monitor.storage.ratings import RatingsStore
from monitor.storage.vaults import VaultStore
from monitor.timefmt import parse_ts

from .vault_store import VaultBatch, VaultRecords

log = get_logger(__name__)


#: Retention runs this often (wall clock) while the writer is up.
RETENTION_INTERVAL_SECONDS = 3600.0
_TIERS = frozenset(t.value for t in Tier)
T = TypeVar("T")


class BadRecord(ValueError):
    pass


def _check(chain: str, token: str, timestamp: str, *tiers: str) -> None:
    if not is_chain(chain):
        raise BadRecord(f"unknown chain {chain!r}")
    if normalize_address(token) is None:
        raise BadRecord(f"bad token address {token[:60]!r}")
    try:
        parse_ts(timestamp)
    except ValueError as exc:
        raise BadRecord(f"bad timestamp: {exc}") from None
    for tier in tiers:
        if tier not in _TIERS:
            raise BadRecord(f"unknown tier {tier[:20]!r}")


def _decoded(decode: Callable[[bytes], T], raw: bytes) -> T:
    """``decode(raw)``; what it cannot decode is a :class:`BadRecord`."""
    # Valid JSON may carry "\u0000", which PostgreSQL text refuses: a record that could
    # never be written must not block the partition behind it.
    if b"\\u0000" in raw:
        raise BadRecord("NUL character in a string")
    try:
        return decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadRecord(str(exc)) from None


def parse_snapshot(raw: bytes) -> RatingSnapshot:
    s = _decoded(decode_snapshot, raw)
    _check(s.chain, s.token_address, s.timestamp, s.tier)
    return s


def parse_event(raw: bytes) -> TierChangeEvent:
    e = _decoded(decode_event, raw)
    _check(e.data.chain, e.data.token_address, e.timestamp, e.data.old_tier, e.data.new_tier)
    return e


def is_data_error(exc: BaseException) -> bool:
    """The database refused the content (not the connection): retrying cannot help."""
    if isinstance(exc, sqlite3.DataError | sqlite3.IntegrityError | OverflowError):
        return True
    return isinstance(exc, asyncpg.DataError | asyncpg.IntegrityConstraintViolationError)


@dataclass
class WriterStats:
    records: int = 0
    snapshots: int = 0
    events: int = 0
    undecodable: int = 0
    batches: int = 0
    by_topic: dict[str, int] = field(default_factory=dict)


class StoreWriter:
    """Consume, decode, write a batch, commit; repeat until ``stop`` is set."""

    def __init__(self, config: Config, store: RatingsStore, bootstrap_servers: str | None = None,
                 group_id: str | None = None) -> None:
        self.config = config
        self.store = store
        self.bootstrap = bootstrap_servers or config.kafka.bootstrap_servers
        self.group_id = group_id or config.kafka.store_group
        self.stats = WriterStats()
        self._next_retention = 0.0
        self.vaults = VaultRecords(config, VaultStore(store.db))

    def split(self, records: Sequence[Any]) -> tuple[list[RatingSnapshot],
                                                     list[TierChangeEvent]]:
        k = self.config.kafka
        snaps: list[RatingSnapshot] = []
        events: list[TierChangeEvent] = []
        for rec in records:
            self.stats.records += 1
            self.stats.by_topic[rec.topic] = self.stats.by_topic.get(rec.topic, 0) + 1
            try:
                if rec.topic == k.ratings_topic:
                    snaps.append(parse_snapshot(rec.value or b""))
                elif rec.topic == k.tier_changes_topic:
                    events.append(parse_event(rec.value or b""))
            except BadRecord as exc:
                self.stats.undecodable += 1
                metrics.RECORDS_UNDECODABLE.labels("store").inc()
                STORE_WRITE_ERRORS.labels(
                    "rating" if rec.topic == k.ratings_topic else "tier_change").inc()
                log.warning("store_writer.undecodable_record_skipped", topic=rec.topic,
                            partition=rec.partition, offset=rec.offset, reason=str(exc)[:300],
                            value_prefix=(rec.value or b"")[:120].decode("utf-8", "replace"))
        return snaps, events

    async def _write_one_by_one(self, snaps: list[RatingSnapshot],
                                events: list[TierChangeEvent]) -> None:
        """After a data error: write each record alone and skip the ones the database
        refuses for their content (counted and logged), so one cannot block the rest."""
        items: list[tuple[list[RatingSnapshot], list[TierChangeEvent]]] = [
            ([s], []) for s in snaps]
        items += [([], [e]) for e in events]
        for one_snap, one_event in items:
            try:
                await self.store.write_batch(one_snap, one_event)
            except Exception as exc:
                if not is_data_error(exc):
                    raise
                self.stats.undecodable += 1
                STORE_WRITE_ERRORS.labels("rating" if one_snap else "tier_change").inc()
                record = one_snap[0] if one_snap else one_event[0]
                log.error("store_writer.record_refused_by_database", error=str(exc)[:300],
                          record=encode(record)[:200].decode("utf-8", "replace"))

    async def _write(self, snaps: list[RatingSnapshot], events: list[TierChangeEvent],
                     stop: asyncio.Event) -> bool:
        """Write until it succeeds (True) or the writer is stopped first (False)."""
        return await self._until_written(
            lambda: self.store.write_batch(snaps, events),
            lambda: self._write_one_by_one(snaps, events),
            "rating" if snaps else "tier_change", stop)

    async def _write_vaults(self, batch: VaultBatch, stop: asyncio.Event) -> bool:
        """As :meth:`_write`, for the vault half of a batch."""
        return await self._until_written(
            lambda: self.vaults.write(batch),
            lambda: self.vaults.write_one_by_one(batch, is_data_error),
            "vault_facts" if batch.facts else "vault_rating", stop)

    async def _until_written(self, write: Callable[[], Awaitable[Any]],
                             one_by_one: Callable[[], Awaitable[None]], kind: str,
                             stop: asyncio.Event) -> bool:
        """Run ``write`` until it succeeds; after a data error, ``one_by_one`` instead (it
        skips the refused records). A failing database is retried with backoff, nothing is
        committed meanwhile. False when the writer was stopped first."""
        delay = 0.5
        while True:
            try:
                try:
                    await write()
                except Exception as exc:
                    if not is_data_error(exc):
                        raise
                    await one_by_one()
                return True
            except Exception as exc:  # database down or failing: keep offsets, retry
                STORE_WRITE_ERRORS.labels(kind).inc()
                log.error("store_writer.batch_write_failed", error=str(exc)[:300],
                          retry_in_seconds=delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                return False
            delay = min(delay * 2, 30.0)

    async def _maybe_retention(self) -> None:
        now = time.monotonic()
        if now < self._next_retention:
            return
        self._next_retention = now + RETENTION_INTERVAL_SECONDS
        try:
            deleted = await self.store.apply_retention(self.config.storage.retention_days)
            deleted += await self.vaults.store.apply_retention()
            log.info("store_writer.retention_applied", rows_deleted=deleted,
                     retention_days=self.config.storage.retention_days)
        except Exception as exc:
            log.error("store_writer.retention_failed", error=str(exc)[:300])

    async def run(self, stop: asyncio.Event) -> None:
        k = self.config.kafka
        if not self.bootstrap:
            # Configuration, not a runtime failure: exit 2 as every command without a broker.
            raise StartupError("kafka.bootstrap_servers is empty: the store writer needs a "
                               "broker (set DEPEG_KAFKA__BOOTSTRAP_SERVERS or pass "
                               "--bootstrap-servers, or use `depeg-monitor run`)")
        # The vault tables are this writer's own addition: created here (idempotent), so a
        # caller that migrated only the ratings store does not stall on a missing table.
        await self.vaults.store.migrate()
        if k.create_topics:
            # The topics it reads may not exist yet (the vault daemon creates its own at its
            # start): a consumer subscribed to a missing topic only sees it at its next
            # metadata refresh, minutes later. Creating them is idempotent.
            try:
                await ensure_topics(k, self.bootstrap)
                await ensure_vault_topics(k, self.config.vaults, self.bootstrap)
            except (KafkaError, OSError, TopicError) as exc:
                log.warning("store_writer.ensure_topics_failed", error=str(exc)[:300])
        # Range assignment gives one consumer the same partition numbers of both topics,
        # so a token's snapshots and tier changes (same key, same partition number) are
        # written by one writer when the group is scaled out.
        # The [kafka] settings of the service's other consumers apply (session, heartbeat,
        # poll interval, request timeout, client id).
        consumer = make_consumer(
            k, k.ratings_topic, k.tier_changes_topic, *self.vaults.topics,
            group_id=self.group_id, bootstrap_servers=self.bootstrap,
            partition_assignment_strategy=(RangePartitionAssignor,))
        closing = "store_writer.close_failed"
        try:
            # Joining can take a dead member's session timeout: a stop does not wait for it.
            if not await start_unless_stopped(consumer, stop):
                closing = "store_writer.join_abandoned"  # its close may wait out the join
                log.info("store_writer.stopped_before_joining", group=self.group_id)
                return
            log.info("store_writer.started", group=self.group_id,
                     topics=[k.ratings_topic, k.tier_changes_topic, *self.vaults.topics])
            await self.vaults.refresh_counts()  # the gauges before the first vault batch
            service_started("store_writer", self.config.gc)
            while not stop.is_set():
                await self._maybe_retention()
                try:
                    batch = await consumer.getmany(timeout_ms=k.batch_timeout_ms,
                                                   max_records=k.batch_max_records)
                except KafkaError as exc:
                    metrics.consumer_progress("store", len(consumer.assignment()), {}, None,
                                              False)
                    log.error("store_writer.fetch_failed", error=str(exc)[:300])
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), 1.0)
                    continue
                records = [r for part in batch.values() for r in part]
                if not records:
                    metrics.consumer_progress("store", len(consumer.assignment()), {}, None,
                                              True)
                    await self.vaults.refresh_counts()
                    continue
                snaps, events = self.split(records)
                vault_batch = self.vaults.split(records)
                started = time.perf_counter()
                if (snaps or events) and not await self._write(snaps, events, stop):
                    break  # stopped before the write landed: the batch is re-read later
                if vault_batch and not await self._write_vaults(vault_batch, stop):
                    break
                STORE_WRITE_SECONDS.labels(
                    "rating" if snaps else "tier_change" if events
                    else "vault_facts" if vault_batch.facts else "vault_rating").observe(
                    time.perf_counter() - started)
                await consumer.commit()
                lag: dict[int, int] = {}
                for tp, part in batch.items():
                    if part:  # both topics share partition numbers: the lag adds up
                        behind = max(0, (consumer.highwater(tp) or 0) - (part[-1].offset + 1))
                        lag[tp.partition] = lag.get(tp.partition, 0) + behind
                metrics.consumer_progress("store", len(consumer.assignment()), lag,
                                          time.perf_counter() - started, True)
                STORE_WRITES.labels("rating").inc(len(snaps))
                STORE_WRITES.labels("tier_change").inc(len(events))
                self.stats.snapshots += len(snaps)
                self.stats.events += len(events)
                self.stats.batches += 1
                if vault_batch:
                    await self.vaults.written(vault_batch)
        finally:
            await close_bounded(consumer.stop(), "consumer_stop", closing)
            log.info("store_writer.stopped", records=self.stats.records,
                     undecodable=self.stats.undecodable + self.vaults.undecodable)


async def run_store_writer(config: Config, stop: asyncio.Event) -> None:
    db = await connect(config.storage.url)
    try:
        store = RatingsStore(db)
        await store.migrate()
        await VaultStore(db).migrate()
        with health.checking("store_writer.store", health.store_check(db)):
            await StoreWriter(config, store).run(stop)
    finally:
        await db.close()


service = Service("store", run_store_writer, order=70)
