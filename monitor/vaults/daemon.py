"""The vault daemon: ``vaults.facts`` and ``depeg.tier-changes`` in, ``vaults.ratings`` out.

Built from the monitor daemon's parts (``monitor.daemon``: broker calls and their shutdown
grace, client start and fenced commits, publisher, readiness, rebalance listener and
restore guard, dead letters, state records and their restore), with the same guarantees:
outputs are acknowledged before vault states are written, states before offsets are
committed, so a crash re-produces at most one checkpoint interval of records, byte for
byte, and loses none.

Two inputs:

- ``vaults.facts`` is consumed in the consumer group ``vaults.group``; each instance rates
  the vaults of its partitions (one :class:`VaultEngine` per partition);
- ``depeg.tier-changes`` is read WHOLE by every instance (``follower``), to its true end
  before any fact is processed; after that each new change re-rates the token's holders.

After a restart, restored vaults apply the tier changes newer than their ``depeg_mark`` only
once their partition has caught up with its facts (``VaultPartition.caught_up``), so the
records of the re-processed interval come out in the order they had before.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from dataclasses import dataclass
from functools import partial
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from .. import health, metrics
from ..config import Config
from ..daemon.clients import commit_unless_fenced, start_group_consumer, start_producer
from ..daemon.deadletter import dead_letter
from ..daemon.lifecycle import ConsumerDaemon, ConsumerStats, summary
from ..daemon.publisher import Publisher
from ..daemon.rebalance import Listener, restore_or_failure, start_offset
from ..daemon.retry import Aborted
from ..daemon.state import STATE_VERSION, StateRecord, encode_state, read_states
from ..gcpolicy import service_started
from ..kafka.topics import ensure_topics, ensure_vault_topics, make_consumer
from ..logs import get_logger
from ..services import Service
from .depeg_link import DepegTable
from .facts import BAD_FACT_REASONS, BadFacts, decode_facts
from .follower import decode_changes, start_follower
from .partitions import VaultPartition
from .records import VaultRating, encode_rating

log = get_logger(__name__)

Record = Any  # aiokafka.structs.ConsumerRecord (aiokafka ships no type hints)
CONSUMER = "vaults"


@dataclass(slots=True)
class VaultDaemonStats(ConsumerStats):
    facts: int = 0
    depeg_changes: int = 0
    restored_vaults: int = 0


#: The stopped line's figures: every count but the restore's skipped records.
SUMMARY = ("records", "facts", "dead_letters", "ratings", "depeg_changes", "checkpoints",
           "restored_vaults")


class VaultDaemon(ConsumerDaemon):
    def __init__(self, config: Config, check_name: str = "vaults") -> None:
        super().__init__(config, check_name)
        self.vaults = config.vaults
        self.depeg = DepegTable()
        self.stats = VaultDaemonStats()
        self._parts: dict[int, VaultPartition] = {}
        self._follower: AIOKafkaConsumer | None = None
        self._publisher: Publisher | None = None
        self._dlq_reasons: Counter[str] = Counter()

    # -- lifecycle --------------------------------------------------------------------
    async def run(self, stop: asyncio.Event | None = None) -> None:
        if stop is not None:
            self._stop = stop
        k = self.kafka
        health.register_check(self.check_name, self.readiness.check)
        producer: AIOKafkaProducer | None = None
        probe: asyncio.Task[None] | None = None
        try:
            if k.create_topics:
                await self._retry(lambda: ensure_topics(k), "ensure_topics")
                await self._retry(lambda: ensure_vault_topics(k, self.vaults),
                                  "ensure_vault_topics")
            producer = await self._retry(partial(start_producer, k), "producer_start")
            self._publisher = self._broker.publisher(producer)
            self._follower = await self._retry(partial(start_follower, k, self.depeg),
                                               "depeg_follower_start")
            listener = Listener(self.on_revoked, self.on_assigned)
            self._consumer = await self._retry(
                partial(start_group_consumer, k, self.vaults.group, self.vaults.facts_topic,
                        listener), "consumer_start")
            probe = asyncio.create_task(self.readiness.probe(self._consumer))
            log.info("vaults.started", bootstrap_servers=k.bootstrap_servers,
                     topic=self.vaults.facts_topic, group=self.vaults.group,
                     depeg_tokens=len(self.depeg))
            await self._loop(self._consumer, self._follower)
            self._broker.abort()  # starts the grace period if it has not started yet
            async with self._lock:
                await self._checkpoint(list(self._parts))
            log.info("vaults.stopped", **summary(self.stats, SUMMARY))
        except Aborted as exc:
            log.error("vaults.shutdown_incomplete", error=str(exc),
                      note="offsets not committed; the next start re-processes from the last "
                           "commit (identical records)")
        finally:
            await self._leave(CONSUMER, probe, (("consumer_stop", self._consumer),
                                                ("follower_stop", self._follower),
                                                ("producer_stop", producer)))

    # -- the loop ---------------------------------------------------------------------
    async def _loop(self, consumer: AIOKafkaConsumer, follower: AIOKafkaConsumer) -> None:
        k = self.kafka
        last_checkpoint = time.monotonic()
        while not self._stop.is_set():
            if self._fatal is not None:
                raise RuntimeError("partition state could not be restored") from self._fatal
            try:
                changes = await follower.getmany(timeout_ms=0, max_records=k.batch_max_records)
                batch = await consumer.getmany(timeout_ms=k.batch_timeout_ms,
                                               max_records=k.batch_max_records)
            except KafkaError as exc:
                self.readiness.failure("fetch", exc)
                await asyncio.sleep(self._broker.backoff().next_delay())
                continue
            now = self.readiness.busy_since = time.monotonic()
            try:
                async with self._lock:
                    started = time.monotonic()
                    if changes:
                        await self._apply_depeg(changes)
                    if batch:
                        await self._process(batch)
                    await self._catch_up(consumer)
                    self._log_dead_letters()
                    if batch or changes:
                        metrics.BATCH_SECONDS.labels(CONSUMER).observe(
                            time.monotonic() - started)
                    if now - last_checkpoint >= k.checkpoint_interval_seconds:
                        last_checkpoint = now
                        await self._checkpoint(list(self._parts))
            finally:
                self.readiness.busy_since = None

    async def _apply_depeg(self, batch: dict[TopicPartition, list[Record]]) -> None:
        for tp in sorted(batch, key=lambda tp: tp.partition):
            for change in decode_changes(tp, batch[tp]):
                if not self.depeg.add(change):
                    metrics.VAULT_DEPEG_CHANGES.labels("duplicate").inc()
                    continue
                metrics.VAULT_DEPEG_CHANGES.labels("applied").inc()
                self.stats.depeg_changes += 1
                for part in self._sorted_parts():
                    if not part.caught_up:
                        continue  # applied by catch_up once its facts are replayed
                    holders = part.engine.holders(change.key)
                    part.dirty.update(holders)
                    await self._emit(part.engine.refresh_holders(change.key))

    async def _process(self, batch: dict[TopicPartition, list[Record]]) -> None:
        records = facts = 0
        for tp in sorted(batch, key=lambda tp: tp.partition):
            part = self._parts.get(tp.partition)
            if part is None:  # revoked while this batch was in flight
                continue
            for rec in batch[tp]:
                offset: int = rec.offset
                if offset < part.next_offset:
                    continue
                part.next_offset = offset + 1
                records += 1
                try:
                    update = decode_facts(rec.value)
                    key = update.key
                    if rec.key != key.encode():
                        raise BadFacts("bad_key", f"record key {rec.key!r:.80} is not {key!r}: "
                                       "a vault's facts must share one partition")
                except BadFacts as exc:
                    await self._dead_letter(rec, exc)
                    continue
                if part.should_skip(key, offset):
                    self.stats.skipped_restored += 1
                    continue
                facts += 1
                part.dirty.add(key)
                await self._emit(part.engine.process(update))
        self.stats.records += records
        self.stats.facts += facts
        metrics.VAULT_FACTS.labels("decoded").inc(facts)
        metrics.VAULT_LAST_FACT_TIME.set(time.time())

    async def _catch_up(self, consumer: AIOKafkaConsumer) -> None:
        """Per partition: once its facts are read to the high watermark, apply the depeg
        changes its vaults have not seen; then report its lag."""
        for part in self._sorted_parts():
            tp = TopicPartition(self.vaults.facts_topic, part.partition)
            highwater = consumer.highwater(tp)
            if highwater is None:
                continue
            metrics.CONSUMER_LAG.labels(CONSUMER, str(part.partition)).set(
                max(highwater - part.next_offset, 0))
            if not part.caught_up and part.next_offset >= highwater:
                part.caught_up = True
                part.dirty.update(part.engine.keys())
                await self._emit(part.engine.catch_up())

    async def _emit(self, records: list[VaultRating]) -> None:
        publisher = self._publisher
        assert publisher is not None
        for record in records:
            await publisher.send(self.vaults.ratings_topic, encode_rating(record),
                                 key=record.key.encode(), kind="vault_rating")
        self.stats.ratings += len(records)
        metrics.VAULT_RATINGS.inc(len(records))

    async def _dead_letter(self, rec: Record, exc: BadFacts) -> None:
        assert self._publisher is not None
        dl = dead_letter(reason=exc.reason, detail=exc.detail, topic=rec.topic,
                         partition=rec.partition, offset=rec.offset, key=rec.key,
                         value=rec.value, prefix_bytes=self.kafka.dlq_value_prefix_bytes)
        await self._publisher.send(self.vaults.dlq_topic, dl.value, key=dl.key,
                                   headers=dl.headers, kind="dead_letter")
        self.stats.dead_letters += 1
        reason = exc.reason if exc.reason in BAD_FACT_REASONS else "other"
        self._dlq_reasons[reason] += 1
        metrics.VAULT_FACTS.labels("dead_lettered").inc()
        metrics.VAULT_FACTS_DEAD_LETTERED.labels(reason).inc()

    def _log_dead_letters(self) -> None:
        if self._dlq_reasons:
            log.warning("vaults.dead_letters", topic=self.vaults.dlq_topic, **self._dlq_reasons)
            self._dlq_reasons.clear()

    # -- checkpoints --------------------------------------------------------------------
    async def _checkpoint(self, partitions: list[int]) -> None:
        """States of changed vaults -> state topic (acknowledged), then commit offsets."""
        publisher = self._publisher
        assert publisher is not None
        parts = [self._parts[p] for p in partitions if p in self._parts]
        await publisher.flush()
        now = time.time()
        written = 0
        for part in parts:
            for key in sorted(part.dirty):
                state = part.engine.state(key)
                if state is None:
                    continue
                record = StateRecord(
                    version=STATE_VERSION, key=key, partition=part.partition,
                    offset=part.next_offset,
                    last_event_ts=state.clock if math.isfinite(state.clock) else None,
                    written_at=now, stale=False, engine_state=part.engine.export_state(key))
                await publisher.send(self.vaults.state_topic, encode_state(record),
                                     key=key.encode(), partition=part.partition, kind="state")
                written += 1
        await publisher.flush()
        for part in parts:
            part.dirty.clear()
        offsets = {TopicPartition(self.vaults.facts_topic, part.partition): part.next_offset
                   for part in parts if part.next_offset != part.committed}
        if offsets:
            await self._commit(offsets)
            for part in parts:
                part.committed = part.next_offset
        if written or offsets:
            self.stats.checkpoints += 1
        self._set_gauges()

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        consumer = self._consumer
        assert consumer is not None
        await self._retry(
            partial(commit_unless_fenced, consumer, offsets, "vaults.commit_fenced"), "commit")

    def _set_gauges(self) -> None:
        tiers: Counter[str] = Counter()
        verdicts: Counter[str] = Counter()
        attention = 0
        for part in self._parts.values():
            for key in part.engine.keys():
                state = part.engine.state(key)
                if state is not None and state.last is not None:
                    tiers[state.last.tier] += 1
                    verdicts[state.last.verdict] += 1
                    attention += state.last.attention
        metrics.set_vault_counts(dict(tiers), dict(verdicts), attention)

    # -- rebalancing ------------------------------------------------------------------
    async def on_revoked(self, revoked: list[TopicPartition]) -> None:
        ours = [tp.partition for tp in revoked if tp.topic == self.vaults.facts_topic]
        async with self._lock:
            try:
                await self._checkpoint(ours)
            except Exception as exc:
                log.error("vaults.revoke_checkpoint_failed",
                          error=f"{type(exc).__name__}: {exc}"[:300])
            finally:
                for p in ours:
                    self._parts.pop(p, None)
                    metrics.CONSUMER_LAG.labels(CONSUMER, str(p)).set(0)
                metrics.ASSIGNED_PARTITIONS.labels(CONSUMER).set(len(self._parts))
        if ours:
            log.info("vaults.partitions_revoked", partitions=sorted(ours))

    async def on_assigned(self, assigned: list[TopicPartition]) -> None:
        failure = await restore_or_failure(self._restore, assigned, "vaults.restore_failed")
        if failure is not None:
            self._fatal = failure

    async def _restore(self, assigned: list[TopicPartition]) -> None:
        consumer = self._consumer
        assert consumer is not None
        topic = self.vaults.facts_topic
        async with self._lock:
            new = sorted(tp.partition for tp in assigned
                         if tp.topic == topic and tp.partition not in self._parts)
            states = await self._retry(
                lambda: read_states(self._state_reader, self.vaults.state_topic, new),
                "restore_state")
            restored = 0
            for p in new:
                position = await self._retry(
                    partial(start_offset, consumer, TopicPartition(topic, p)), "start_offset")
                self._parts[p] = VaultPartition.restore(p, self.vaults, self.depeg, position,
                                                        states[p])
                restored += len(states[p])
            self.stats.restored_vaults += restored
            if not self.joined.is_set():  # started: imports done, first state restored
                service_started("vaults", self.config.gc)
            self.joined.set()
            metrics.ASSIGNED_PARTITIONS.labels(CONSUMER).set(len(self._parts))
        log.info("vaults.partitions_assigned", partitions=new, restored_vaults=restored,
                 positions={p: self._parts[p].next_offset for p in new})

    def _state_reader(self) -> AIOKafkaConsumer:
        k = self.kafka
        return make_consumer(k, group_id=None, client_id=f"{k.client_id}-vaults-state-reader")

    # -- helpers ------------------------------------------------------------------------
    def _sorted_parts(self) -> list[VaultPartition]:
        return [self._parts[p] for p in sorted(self._parts)]

    def _describe(self) -> str:
        vaults = sum(len(part.engine) for part in self._parts.values())
        return f"{len(self._parts)} partitions, {vaults} vaults, {len(self.depeg)} depeg tokens"


# -- the service (the command, ``depeg-monitor vaults``, is in ``command.py``) ------------
async def run_service(config: Config, stop: asyncio.Event) -> None:
    await VaultDaemon(config).run(stop)


#: After the monitor (order 10): it creates the depeg topics the vault daemon follows.
service = Service(name="vaults", run=run_service, order=15)
