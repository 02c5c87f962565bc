"""The monitor daemon: consume ticks, run the engine, publish, checkpoint, commit.

Per batch (``getmany``), under one lock that the rebalance callbacks also take:

1. decode every record; a bad one becomes a dead letter (never stops the loop);
2. feed the partition's engine; queue its outputs (tier changes, rating snapshots);
3. outputs and dead letters go to the producer at once (not awaited per batch);
4. at most every ``checkpoint_interval_seconds`` (and on revoke and shutdown): wait until
   the broker acknowledged every record sent so far, write the state of every token changed
   since the last checkpoint to the state topic, wait for those too, and only then commit
   the partitions' offsets.

So offsets never run ahead of acknowledged outputs (at-least-once) nor of the state that
covers them (exact recovery, see ``state.py``); a crash re-produces at most one checkpoint
interval of outputs, byte for byte, with the same event ids.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError

from .. import health, metrics
from ..config import Config
from ..engine import Output
from ..kafka.topics import ensure_topics, make_consumer, make_producer
from ..logs import get_logger
from ..records import TierChangeEvent, encode
from ..ticks import BadTick, decode_tick
from .clock import LiveClock
from .deadletter import dead_letter
from .partitions import PartitionState
from .publisher import Publisher
from .retry import Aborted, Backoff, retry
from .state import STATE_VERSION, StateRecord, encode_state, read_states

log = get_logger(__name__)

RETRIABLE = (KafkaError, OSError)
T = TypeVar("T")
#: aiokafka ships no type hints; a fetched record (``aiokafka.structs.ConsumerRecord``).
Record = Any


@dataclass(slots=True)
class DaemonStats:
    records: int = 0
    ticks: int = 0
    dead_letters: int = 0
    tier_changes: int = 0
    ratings: int = 0
    batches: int = 0
    checkpoints: int = 0
    restored_tokens: int = 0
    skipped_restored: int = 0


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, daemon: MonitorDaemon) -> None:
        self.daemon = daemon

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        await self.daemon.on_revoked(list(revoked))

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        await self.daemon.on_assigned(list(assigned))


class MonitorDaemon:
    def __init__(self, config: Config, check_name: str = "monitor") -> None:
        self.config = config
        self.kafka = config.kafka
        self.check_name = check_name
        self.stats = DaemonStats()
        self._parts: dict[int, PartitionState] = {}
        self._lock = asyncio.Lock()
        self._clock = LiveClock(config.model.stale_after_seconds)
        self._consumer: AIOKafkaConsumer | None = None
        self._publisher: Publisher | None = None
        self._stop = asyncio.Event()
        self._grace_until: float | None = None
        #: Set once this instance joined its group and restored its partitions' state.
        self.joined = asyncio.Event()
        self._broker_error: str | None = None
        self._batch_started: float | None = None
        self._dlq_reasons: Counter[str] = Counter()

    # -- lifecycle --------------------------------------------------------------------
    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Run until ``stop`` is set, then finish the batch, checkpoint and leave."""
        if stop is not None:
            self._stop = stop
        k = self.kafka
        health.register_check(self.check_name, self.check)
        producer: AIOKafkaProducer | None = None
        consumer: AIOKafkaConsumer | None = None
        probe: asyncio.Task[None] | None = None
        try:
            if k.create_topics:
                await self._retry(lambda: ensure_topics(k), "ensure_topics")
            producer = await self._retry(self._start_producer, "producer_start")
            self._publisher = Publisher(producer, self._backoff(), self._abort,
                                        self._on_broker_failure, self._on_broker_recovery)
            consumer = await self._retry(self._start_consumer, "consumer_start")
            self._consumer = consumer
            probe = asyncio.create_task(self._probe_broker(consumer))
            log.info("monitor.started", bootstrap_servers=k.bootstrap_servers,
                     topic=k.ticks_topic, group=k.monitor_group)
            await self._loop(consumer)
            self._grace_until = time.monotonic() + k.shutdown_grace_seconds
            async with self._lock:
                await self._checkpoint(list(self._parts))
            log.info("monitor.stopped", **self._summary())
        except Aborted as exc:
            log.error("monitor.shutdown_incomplete", error=str(exc),
                      note="offsets not committed; the next start re-processes from the "
                           "last commit (same event ids)")
        finally:
            if probe:
                probe.cancel()
            health.unregister_check(self.check_name)
            metrics.ASSIGNED_PARTITIONS.labels("monitor").set(0)
            if consumer:
                await consumer.stop()
            if producer:
                await producer.stop()

    def request_stop(self) -> None:
        self._stop.set()

    async def _start_producer(self) -> AIOKafkaProducer:
        producer = make_producer(self.kafka)
        try:
            await producer.start()
        except BaseException:
            await producer.stop()
            raise
        return producer

    async def _start_consumer(self) -> AIOKafkaConsumer:
        k = self.kafka
        consumer = make_consumer(k, group_id=k.monitor_group)
        try:
            await consumer.start()
            consumer.subscribe([k.ticks_topic], listener=_Listener(self))
        except BaseException:
            await consumer.stop()
            raise
        return consumer

    # -- the loop ---------------------------------------------------------------------
    async def _loop(self, consumer: AIOKafkaConsumer) -> None:
        k = self.kafka
        next_sweep = time.monotonic() + k.live_clock_interval_seconds
        last_checkpoint = time.monotonic()
        while not self._stop.is_set():
            try:
                batch = await consumer.getmany(timeout_ms=k.batch_timeout_ms,
                                               max_records=k.batch_max_records)
            except KafkaError as exc:
                self._on_broker_failure("fetch", exc)
                await asyncio.sleep(self._backoff().next_delay())
                continue
            now = self._batch_started = time.monotonic()  # the stall watchdog's clock
            try:
                async with self._lock:
                    if batch:
                        await self._process(batch)
                    if now >= next_sweep:
                        next_sweep = now + k.live_clock_interval_seconds
                        await self._sweep()
                    if now - last_checkpoint >= k.checkpoint_interval_seconds:
                        last_checkpoint = now
                        await self._checkpoint(list(self._parts))
            finally:
                self._batch_started = None

    async def _process(self, batch: dict[TopicPartition, list[Record]]) -> None:
        assert self._publisher is not None
        started = time.monotonic()
        k = self.kafka
        records = ticks = late = 0
        for tp, recs in batch.items():
            part = self._parts.get(tp.partition)
            if part is None:  # revoked while this batch was in flight: not ours any more
                continue
            engine = part.engine
            late_before = engine.stats.late
            for rec in recs:
                offset: int = rec.offset
                if offset < part.next_offset:
                    continue  # handed out again around a rebalance; already processed
                part.next_offset = offset + 1
                records += 1
                try:
                    tick = decode_tick(rec.value)
                    key = tick.key
                    if rec.key != key.encode():
                        raise BadTick("bad_key", f"record key {rec.key!r:.80} is not "
                                      f"{key!r}: a token's ticks must share one partition")
                except BadTick as exc:
                    await self._dead_letter(tp, rec, exc)
                    continue
                if part.should_skip(key, offset):
                    self.stats.skipped_restored += 1
                    continue
                ticks += 1
                outputs = engine.process(tick)
                self._clock.tick(key, tick.ts, tp.partition)
                part.dirty.add(key)
                if outputs:
                    await self._emit(outputs)
            late += engine.stats.late - late_before
            highwater = self._consumer.highwater(tp) if self._consumer else None
            if highwater is not None:
                metrics.CONSUMER_LAG.labels("monitor", str(tp.partition)).set(
                    max(highwater - part.next_offset, 0))
        self.stats.records += records
        self.stats.ticks += ticks
        self.stats.batches += 1
        metrics.TICKS_CONSUMED.inc(records)
        metrics.TICKS_DECODED.inc(ticks)
        metrics.TICKS_LATE.inc(late)
        metrics.LAST_TICK_TIME.set(time.time())
        if self._dlq_reasons:
            log.warning("monitor.dead_letters", topic=k.dlq_topic, **self._dlq_reasons)
            self._dlq_reasons.clear()
        metrics.BATCH_SECONDS.labels("monitor").observe(time.monotonic() - started)

    async def _emit(self, outputs: list[Output]) -> None:
        assert self._publisher is not None
        k = self.kafka
        for out in outputs:
            if isinstance(out, TierChangeEvent):
                d = out.data
                await self._publisher.send(k.tier_changes_topic, encode(out),
                                    key=f"{d.chain}:{d.token_address}".encode(),
                                    kind="tier_change")
                self.stats.tier_changes += 1
                metrics.tier_changed(d.old_tier, d.new_tier)
                log.info("monitor.tier_change", event_id=out.event_id, at=out.timestamp,
                         chain=d.chain, token=d.token_address, symbol=d.symbol,
                         old_tier=d.old_tier, new_tier=d.new_tier, rating=d.risk_score)
            else:
                await self._publisher.send(k.ratings_topic, encode(out),
                                    key=f"{out.chain}:{out.token_address}".encode(),
                                    kind="rating")
                self.stats.ratings += 1
                metrics.token_series.observe(out)

    async def _dead_letter(self, tp: TopicPartition, rec: Record, exc: BadTick) -> None:
        assert self._publisher is not None
        dl = dead_letter(reason=exc.reason, detail=exc.detail, topic=tp.topic,
                         partition=tp.partition, offset=rec.offset,
                         key=rec.key, value=rec.value,
                         prefix_bytes=self.kafka.dlq_value_prefix_bytes)
        await self._publisher.send(self.kafka.dlq_topic, dl.value, key=dl.key,
                                   headers=dl.headers, kind="dead_letter")
        self.stats.dead_letters += 1
        self._dlq_reasons[exc.reason] += 1
        metrics.dead_lettered(exc.reason)

    # -- live clock -------------------------------------------------------------------
    async def _sweep(self) -> None:
        """Refresh tokens whose ticks stopped, in extrapolated event time."""
        assert self._publisher is not None
        started = time.monotonic()
        due = self._clock.due()
        for key, partition, until in due:
            part = self._parts.get(partition)
            if part is None:
                continue
            outputs = part.engine.advance(key, until)
            if outputs:
                part.dirty.add(key)
                await self._emit(outputs)
        tiers: Counter[str] = Counter()
        tracked = 0
        for part in self._parts.values():
            for key in part.engine.keys():
                tracked += 1
                tier = part.engine.tier_of(key)
                if tier is not None:
                    tiers[tier.value] += 1
        metrics.set_tier_counts(dict(tiers))
        metrics.TOKENS_TRACKED.set(tracked)
        metrics.TOKENS_STALE.set(len(due))
        if due:
            log.warning("monitor.stale_tokens", count=len(due),
                        stale_after_seconds=self._clock.stale_after,
                        sample=sorted(key for key, _, _ in due)[:10])
        metrics.REFRESH_SECONDS.observe(time.monotonic() - started)

    # -- checkpoints --------------------------------------------------------------------
    async def _checkpoint(self, partitions: list[int]) -> None:
        """States of changed tokens -> state topic (acknowledged), then commit offsets."""
        assert self._publisher is not None and self._consumer is not None
        k = self.kafka
        parts = [self._parts[p] for p in partitions if p in self._parts]
        await self._publisher.flush()  # every output so far is acknowledged before states
        now = time.time()
        written = 0
        for part in parts:
            for key in part.dirty:
                record = StateRecord(
                    version=STATE_VERSION, key=key, partition=part.partition,
                    offset=part.next_offset, last_event_ts=self._clock.last_event_ts(key),
                    written_at=now, stale=self._clock.is_stale(key),
                    engine_state=part.engine.export_state(key),
                )
                await self._publisher.send(k.state_topic, encode_state(record),
                                           key=key.encode(), partition=part.partition,
                                           kind="state")
                written += 1
        await self._publisher.flush()
        for part in parts:
            part.dirty.clear()
        offsets = {TopicPartition(k.ticks_topic, part.partition): part.next_offset
                   for part in parts if part.next_offset != part.committed}
        if offsets:
            await self._commit(offsets)
            for part in parts:
                part.committed = part.next_offset
        if written or offsets:
            self.stats.checkpoints += 1

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        consumer = self._consumer
        assert consumer is not None

        async def op() -> None:
            try:
                await consumer.commit(offsets)
            except (CommitFailedError, IllegalStateError) as exc:
                # The group moved on without us: the new owner resumes from the states
                # just written (they are exact at their offsets), so nothing is lost.
                log.warning("monitor.commit_fenced", error=str(exc)[:200],
                            partitions=sorted(tp.partition for tp in offsets))

        await self._retry(op, "commit")

    # -- rebalancing ------------------------------------------------------------------
    async def on_revoked(self, revoked: list[TopicPartition]) -> None:
        ours = [tp.partition for tp in revoked if tp.topic == self.kafka.ticks_topic]
        async with self._lock:  # waits for the batch in flight
            try:
                await self._checkpoint(ours)
            except Aborted as exc:
                log.error("monitor.revoke_checkpoint_failed", error=str(exc))
            for p in ours:
                part = self._parts.pop(p, None)
                if part is not None:
                    self._clock.forget(list(part.engine.keys()))
                metrics.CONSUMER_LAG.labels("monitor", str(p)).set(0)
            metrics.ASSIGNED_PARTITIONS.labels("monitor").set(len(self._parts))
        if ours:
            log.info("monitor.partitions_revoked", partitions=sorted(ours))

    async def on_assigned(self, assigned: list[TopicPartition]) -> None:
        k = self.kafka
        consumer = self._consumer
        assert consumer is not None
        async with self._lock:
            new = sorted(tp.partition for tp in assigned
                         if tp.topic == k.ticks_topic and tp.partition not in self._parts)
            states = await self._retry(
                lambda: read_states(self._state_reader, k.state_topic, new), "restore_state")
            restored = 0
            for p in new:
                tp = TopicPartition(k.ticks_topic, p)
                position = await self._retry(partial(self._start_offset, consumer, tp),
                                             "start_offset")
                part = PartitionState.restore(p, self.config.model, position, states[p])
                part.committed = position
                for key, state in states[p].items():
                    self._clock.restored(key, state.last_event_ts, p)
                restored += len(states[p])
                self._parts[p] = part
            self.stats.restored_tokens += restored
            self.joined.set()
            metrics.ASSIGNED_PARTITIONS.labels("monitor").set(len(self._parts))
        log.info("monitor.partitions_assigned", partitions=new, restored_tokens=restored,
                 positions={p: self._parts[p].next_offset for p in new})

    @staticmethod
    async def _start_offset(consumer: AIOKafkaConsumer, tp: TopicPartition) -> int:
        """Where the group resumes ``tp``: its committed offset, else the beginning.

        Not ``consumer.position()``: the fetcher starts as soon as the partition is
        assigned, so by the time this callback runs ``getmany`` may already have handed
        out (and moved the position past) records this instance has not processed yet.
        """
        committed = await consumer.committed(tp)
        beginning = (await consumer.beginning_offsets([tp]))[tp]
        if committed is None or committed < beginning:  # auto_offset_reset="earliest"
            return int(beginning)
        return int(committed)

    def _state_reader(self) -> AIOKafkaConsumer:
        k = self.kafka
        return make_consumer(k, group_id=None, client_id=f"{k.client_id}-state-reader")

    # -- broker health ------------------------------------------------------------------
    def _backoff(self) -> Backoff:
        return Backoff(self.kafka.retry_backoff_seconds, self.kafka.retry_backoff_max_seconds)

    def _abort(self) -> bool:
        return self._grace_until is not None and time.monotonic() > self._grace_until

    async def _retry(self, op: Callable[[], Awaitable[T]], what: str) -> T:
        return await retry(op, what=what, backoff=self._backoff(), abort=self._abort,
                           retry_on=RETRIABLE, on_failure=self._on_broker_failure,
                           on_recovery=self._on_broker_recovery)

    def _on_broker_failure(self, what: str, exc: BaseException) -> None:
        self._broker_error = f"{what}: {type(exc).__name__}: {exc}"[:300]
        metrics.BROKER_CONNECTED.labels("monitor").set(0)

    def _on_broker_recovery(self, what: str) -> None:
        self._broker_error = None
        metrics.BROKER_CONNECTED.labels("monitor").set(1)

    async def _probe_broker(self, consumer: AIOKafkaConsumer) -> None:
        """A cheap metadata round trip every few seconds, so an idle daemon notices an
        unreachable broker too (fetches fail silently inside the client)."""
        interval = max(1.0, min(5.0, self.kafka.ready_stall_seconds / 3))
        while True:
            await asyncio.sleep(interval)
            try:
                await asyncio.wait_for(consumer.topics(), timeout=interval)
            except (TimeoutError, *RETRIABLE) as exc:
                if self._broker_error is None:
                    log.warning("monitor.broker_unreachable", error=type(exc).__name__)
                self._on_broker_failure("probe", exc)
            else:
                if self._broker_error is not None and self._broker_error.startswith("probe"):
                    log.info("monitor.broker_reachable")
                    self._on_broker_recovery("probe")

    async def check(self) -> tuple[bool, str]:
        """Readiness for ``/readyz`` (registered as ``monitor``)."""
        if self._stop.is_set():
            return False, "stopping"
        if self._broker_error:
            return False, f"broker unavailable ({self._broker_error})"
        started = self._batch_started
        if started is not None and time.monotonic() - started > self.kafka.ready_stall_seconds:
            return False, f"batch stuck for {time.monotonic() - started:.0f}s"
        if not self.joined.is_set():
            return False, "waiting for a partition assignment"
        tokens = sum(len(list(part.engine.keys())) for part in self._parts.values())
        return True, f"{len(self._parts)} partitions, {tokens} tokens"

    def _summary(self) -> dict[str, int]:
        s = self.stats
        return {"records": s.records, "ticks": s.ticks, "dead_letters": s.dead_letters,
                "tier_changes": s.tier_changes, "ratings": s.ratings,
                "checkpoints": s.checkpoints, "restored_tokens": s.restored_tokens}
