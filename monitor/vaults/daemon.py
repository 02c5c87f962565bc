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
import time
from functools import partial

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from .. import health, metrics
from ..config import Config
from ..daemon.clients import start_group_consumer, start_producer
from ..daemon.deadletter import dead_letter
from ..daemon.lifecycle import summary
from ..daemon.rebalance import Listener
from ..daemon.retry import Aborted
from ..kafka.fetched import Record
from ..kafka.topics import ensure_topics, ensure_vault_topics
from ..logs import get_logger
from ..services import Service
from .checkpoint import CONSUMER, LOGGER, VaultCheckpoints
from .facts import BAD_FACT_REASONS, BadFacts, decode_facts
from .follower import decode_changes, start_follower
from .records import VaultRating, encode_rating

log = get_logger(LOGGER)

#: The stopped line's figures: every count but the restore's skipped records.
SUMMARY = ("records", "facts", "dead_letters", "ratings", "depeg_changes", "checkpoints",
           "restored_vaults")


class VaultDaemon(VaultCheckpoints):
    """The loop and its lifecycle; the state it runs on, its checkpoints and its rebalance
    callbacks are ``checkpoint.py``."""

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


# -- the service (the command, ``depeg-monitor vaults``, is in ``command.py``) ------------
async def run_service(config: Config, stop: asyncio.Event) -> None:
    await VaultDaemon(config).run(stop)


#: After the monitor (order 10): it creates the depeg topics the vault daemon follows.
service = Service(name="vaults", run=run_service, order=15)
