"""The monitor daemon: consume ticks, run the engine, publish, checkpoint, commit.

Per batch (``getmany``), under one lock that the rebalance callbacks also take:

1. decode every record; a bad one becomes a dead letter (never stops the loop);
2. feed the partition's engine; the batch's outputs (tier changes, rating snapshots) go to
   the producer together once the batch has run through the engine, dead letters as they
   are found (neither is awaited per batch: the producer's futures are kept);
3. at most every ``checkpoint_interval_seconds`` (and on revoke and shutdown): wait until
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
from collections.abc import Awaitable
from functools import partial
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError
from prometheus_client import Gauge

from .. import health, metrics
from ..config import Config
from ..engine import Output
from ..kafka.topics import ensure_topics, make_consumer
from ..logs import get_logger
from ..spread.feed import gated_keys_or_none
from ..ticks import BadTick, Tick, decode_tick
from ..timefmt import format_ts
from ..timesanity import check_not_future
from .brokercalls import BrokerCalls
from .clients import commit_unless_fenced, start_group_consumer, start_producer
from .clock import LiveClock
from .lost import BrokerLost, LossDetector
from .outputs import DaemonStats, OutputWriter
from .partitions import PartitionState
from .publisher import Outgoing, Publisher
from .readiness import Readiness
from .rebalance import Listener, restore_or_failure, start_offset
from .retry import Aborted
from .spread_gate import GateWatch
from .state import STATE_VERSION, StateRecord, encode_state, read_states
from .sweep import Sweeper

log = get_logger(__name__)

#: Closing the clients after a stop may take this long on top of the grace period.
SHUTDOWN_MARGIN_SECONDS = 5.0
#: aiokafka ships no type hints; a fetched record (``aiokafka.structs.ConsumerRecord``).
Record = Any


class MonitorDaemon:
    def __init__(self, config: Config, check_name: str = "monitor") -> None:
        self.config = config
        self.kafka = config.kafka
        self.check_name = check_name
        self.stats = DaemonStats()
        self._parts: dict[int, PartitionState] = {}
        #: Tokens whose ratings wait for the spread stage (docs/cross-chain-spread.md).
        self._spread_gated = gated_keys_or_none(config)
        #: Revoked partitions, until the next assignment says whether they come back.
        self._set_aside: dict[int, PartitionState] = {}
        self._lock = asyncio.Lock()
        self._clock = LiveClock(config.model.stale_after_seconds)
        self._sweeper = Sweeper(self._clock, config.model.refresh_seconds)
        self._gates = GateWatch(config)
        self._consumer: AIOKafkaConsumer | None = None
        self._out: OutputWriter | None = None
        self._stop = asyncio.Event()
        self.readiness = Readiness(self.kafka.ready_stall_seconds,
                                   lambda: self._stop.is_set(), self._describe)
        self._broker = BrokerCalls(self.kafka, self.readiness, lambda: self._stop.is_set(),
                                   lambda: self._consumer is not None)
        self._retry = self._broker.retry
        #: Set once this instance joined its group and restored its partitions' state.
        self.joined = self.readiness.joined
        #: Set by a rebalance callback that could not restore state, or when the broker
        #: lost what it had acknowledged (``lost.py``); the loop raises it.
        self._fatal: BaseException | None = None
        self._losses = LossDetector()
        #: Monotonic time the loop last started an iteration (None before the loop runs).
        self._loop_beat: float | None = None
        #: Counts the restore's seeks; partition -> the count at its latest seek. A batch
        #: fetched before a partition's seek holds records from the old position for it.
        self._seeks = 0
        self._seeked: dict[int, int] = {}
        self._lag_gauges: dict[int, Gauge] = {}

    # -- lifecycle --------------------------------------------------------------------
    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Run until ``stop`` is set, then finish the batch, checkpoint and leave.

        A stop always ends this within ``shutdown_grace_seconds`` (plus a few seconds to
        close the clients): whatever still waits for an unreachable broker then is
        cancelled, with an error log, and nothing more is committed.
        """
        if stop is not None:
            self._stop = stop
        body = asyncio.create_task(self._run(), name="monitor")
        stopping = asyncio.create_task(self._stop.wait())
        health.register_liveness(self.check_name, self.alive)
        limit = self.kafka.shutdown_grace_seconds + SHUTDOWN_MARGIN_SECONDS
        try:
            await asyncio.wait({body, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not body.done():
                await asyncio.wait({body}, timeout=limit)
            if not body.done():
                log.error("monitor.shutdown_forced", waited_seconds=round(limit, 1),
                          note="still waiting for the broker; cancelled without committing "
                               "(the next start re-processes from the last commit)")
                body.cancel()
                await asyncio.wait({body}, timeout=SHUTDOWN_MARGIN_SECONDS)
                return
            await body  # re-raises what ended it (BrokerLost, a failed restore)
        finally:
            stopping.cancel()
            if not body.done():
                body.cancel()
            health.unregister_liveness(self.check_name)

    async def _run(self) -> None:
        k = self.kafka
        health.register_check(self.check_name, self.check)
        producer: AIOKafkaProducer | None = None
        consumer: AIOKafkaConsumer | None = None
        probe: asyncio.Task[None] | None = None
        try:
            if k.create_topics:
                await self._retry(lambda: ensure_topics(k), "ensure_topics")
            producer = await self._retry(partial(start_producer, k), "producer_start")
            publisher = Publisher(producer, self._broker.backoff(), self._broker.abort,
                                  self.readiness.failure, self.readiness.recovery)
            self._out = OutputWriter(k, publisher, self.stats)
            listener = Listener(self.on_revoked, self.on_assigned)
            consumer = await self._retry(
                partial(start_group_consumer, k, k.monitor_group, k.ticks_topic, listener),
                "consumer_start")
            self._consumer = consumer
            probe = asyncio.create_task(self.readiness.probe(consumer, self._check_topics))
            log.info("monitor.started", bootstrap_servers=k.bootstrap_servers,
                     topic=k.ticks_topic, group=k.monitor_group)
            await self._loop(consumer)
            self._broker.abort()  # starts the grace period if it has not started yet
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
                await _bounded(consumer.stop(), "consumer_stop")
            if producer:
                await _bounded(producer.stop(), "producer_stop")

    def alive(self) -> tuple[bool, str]:
        """Liveness for ``/healthz``: the loop finished an iteration recently."""
        beat = self._loop_beat
        if beat is None or self._stop.is_set():
            return True, "starting" if beat is None else "stopping"
        stuck = time.monotonic() - beat
        if stuck > self.kafka.liveness_stall_seconds:
            return False, (f"monitor loop stuck for {stuck:.0f}s "
                           f"(bound kafka.liveness_stall_seconds="
                           f"{self.kafka.liveness_stall_seconds:g})")
        return True, "monitor loop running"

    async def check(self) -> tuple[bool, str]:
        """Readiness for ``/readyz`` (see ``readiness.py``)."""
        return await self.readiness.check()

    # -- the loop ---------------------------------------------------------------------
    async def _loop(self, consumer: AIOKafkaConsumer) -> None:
        k = self.kafka
        next_sweep = time.monotonic() + k.live_clock_interval_seconds
        last_checkpoint = time.monotonic()
        while not self._stop.is_set():
            self._loop_beat = time.monotonic()
            if isinstance(self._fatal, BrokerLost):
                raise self._fatal
            if self._fatal is not None:
                raise RuntimeError("partition state could not be restored") from self._fatal
            self._check_highwaters(consumer)
            seeks = self._seeks
            try:
                batch = await consumer.getmany(timeout_ms=k.batch_timeout_ms,
                                               max_records=k.batch_max_records)
            except KafkaError as exc:
                self.readiness.failure("fetch", exc)
                await asyncio.sleep(self._broker.backoff().next_delay())
                continue
            now = self.readiness.busy_since = time.monotonic()  # the stall watchdog
            try:
                async with self._lock:
                    if batch:
                        await self._process(batch, seeks)
                    if now >= next_sweep:
                        next_sweep = now + k.live_clock_interval_seconds
                        assert self._out is not None
                        await self._sweeper.sweep(self._parts, self._out)
                        if self._spread_gated:
                            await self._gates.check(self._parts, self._out)
                    if now - last_checkpoint >= k.checkpoint_interval_seconds:
                        last_checkpoint = now
                        await self._checkpoint(list(self._parts))
            finally:
                self.readiness.busy_since = None

    async def _process(self, batch: dict[TopicPartition, list[Record]], seeks: int) -> None:
        """``seeks``: ``self._seeks`` when the batch was asked for."""
        out = self._out
        assert out is not None
        started = time.monotonic()
        records = ticks = late = 0
        wall = time.time()  # the wall clock bounds how far ahead a tick may be dated
        tolerance = self.config.model.future_tolerance_seconds
        # The batch's outputs, handed to the producer together after the engine ran: no
        # producer call (nor its await) between ticks; acknowledged in bulk at checkpoint.
        produced: list[Output] = []
        for tp, recs in batch.items():
            part = self._parts.get(tp.partition)
            if part is None:  # revoked while this batch was in flight: not ours any more
                continue
            if self._seeked.get(tp.partition, 0) > seeks:
                # Sought back (a restore re-reads held ticks) while this batch was in
                # flight: its records may come from before the seek. Drop them and fetch
                # again from where this partition really is.
                self._seek(tp.partition, part.next_offset)
                continue
            first = part.next_offset
            if recs and recs[0].offset < first:
                # Handed out again around a rebalance: what is below the position was
                # processed already (a partition's records come in offset order).
                recs = [rec for rec in recs if rec.offset >= first]
            if not recs:
                continue
            records += len(recs)
            engine = part.engine
            # Looked up once per partition, not per tick (this loop is the daemon's hot
            # path: ~1 µs of attribute and method lookups per tick add up at 100k/s).
            engine_stats = engine.stats
            process = engine.process
            clock = self._clock
            refeed, skip_below, dirty = part.refeed, part.skip_below, part.dirty
            resume_at = part.resume_at
            held, held_of = part.held, part.held.get
            # No tick can be past its future bound below this (the bound is max(wall,
            # newest) + tolerance, never lower): most ticks skip the exact check.
            future_from = wall + tolerance
            late_before = engine_stats.late
            for rec in recs:
                offset: int = rec.offset
                if offset < resume_at and offset not in refeed:
                    continue  # read again after a restore, but inside the restored states
                try:
                    tick = decode_tick(rec.value)
                    key = tick.key
                    if rec.key != key.encode():
                        raise BadTick("bad_key", f"record key {rec.key!r:.80} is not "
                                      f"{key!r}: a token's ticks must share one partition")
                except BadTick as exc:
                    await out.dead_letter(rec, exc)
                    continue
                if (refeed or skip_below) and part.should_skip(key, offset):
                    self.stats.skipped_restored += 1
                    continue
                if tick.ts > future_from:
                    try:
                        check_not_future(tick, clock.last_event_ts(key), wall, tolerance)
                    except BadTick as exc:
                        await out.dead_letter(rec, exc)
                        continue
                ticks += 1
                late_before_tick = engine_stats.late
                outputs = process(tick)
                spread = tick.cross_chain_chains is not None
                if engine_stats.late != late_before_tick:
                    # A late spread observation is a copy the restarted spread stage sent
                    # again (or one for a boundary rated without it): expected, not news.
                    if not spread:
                        await out.dead_letter(rec, BadTick("late",
                                                           self._late_detail(key, tick)))
                    continue
                if not spread:  # spread observations are not the token's liveness
                    clock.tick(key, tick.ts, tp.partition)
                # The engine may hold the tick for lateness: its offset goes into the
                # token's compact state while it does (PartitionState.took, inlined).
                mine = held_of(key)
                if mine is None:
                    held[key] = {id(tick): (offset, tick)}
                else:
                    mine[id(tick)] = (offset, tick)
                dirty.add(key)
                if outputs:
                    produced += outputs
            # Nothing in the loop reads the position: it moves once per partition.
            part.next_offset = recs[-1].offset + 1
            late += engine_stats.late - late_before
            highwater = self._consumer.highwater(tp) if self._consumer else None
            if highwater is not None:
                self._lag_gauge(tp.partition).set(max(highwater - part.next_offset, 0))
        if produced:
            await out.emit(produced)
        self.stats.records += records
        self.stats.ticks += ticks
        self.stats.batches += 1
        metrics.TICKS_CONSUMED.inc(records)
        metrics.TICKS_DECODED.inc(ticks)
        metrics.TICKS_LATE.inc(late)
        metrics.LAST_TICK_TIME.set(time.time())
        out.log_dead_letters()
        metrics.BATCH_SECONDS.labels("monitor").observe(time.monotonic() - started)

    def _lag_gauge(self, partition: int) -> Gauge:
        """The partition's lag gauge child (``labels()`` hashes and locks per call)."""
        gauge = self._lag_gauges.get(partition)
        if gauge is None:
            gauge = self._lag_gauges[partition] = metrics.CONSUMER_LAG.labels(
                "monitor", str(partition))
        return gauge

    def _late_detail(self, key: str, tick: Tick) -> str:
        newest = self._clock.last_event_ts(key)
        return (f"tick dated {format_ts(tick.ts)} is older than the token's reordering window "
                f"({self.config.model.lateness_seconds}s behind its newest tick "
                f"{format_ts(newest) if newest is not None else '?'}, or at/before its last "
                "refresh); replay it from the dead-letter topic if it matters")

    # -- checkpoints --------------------------------------------------------------------
    async def _checkpoint(self, partitions: list[int]) -> None:
        """States of changed tokens -> state topic (acknowledged), then commit offsets."""
        assert self._out is not None
        if self._fatal is not None:
            return  # the broker lost our records: commit nothing into the new log
        publisher = self._out.publisher
        k = self.kafka
        parts = [self._parts[p] for p in partitions if p in self._parts]
        await publisher.flush()  # every output so far is acknowledged before the states
        now = time.time()
        states: list[Outgoing] = []
        for part in parts:
            for key in part.dirty:
                # Compact: the ticks still held for lateness stay out of the state (their
                # offsets go in instead), so its size does not grow with tick density.
                pending = part.pending_offsets(key)
                record = StateRecord(
                    version=STATE_VERSION, key=key, partition=part.partition,
                    offset=part.state_offset(key),
                    last_event_ts=self._clock.last_event_ts(key),
                    written_at=now, stale=self._clock.is_stale(key),
                    engine_state=part.engine.export_state(key, pending=pending is None),
                    pending_offsets=pending or [],
                )
                states.append(Outgoing(k.state_topic, encode_state(record), key.encode(),
                                       part.partition, None, "state"))
        written = len(states)
        await publisher.send_all(states)  # one record batch per partition
        await publisher.flush()
        for part in parts:
            part.dirty.clear()
        # Never backwards: while a restored partition is read again below its committed
        # offset (compact states' held ticks), the group's offset stays where it was.
        offsets = {TopicPartition(k.ticks_topic, part.partition): part.next_offset
                   for part in parts if part.next_offset > part.committed}
        if offsets and await self._commit(offsets):
            for part in parts:
                part.committed = max(part.committed, part.next_offset)
                # Only offsets the group really took count as "ours" for lost.py.
                self._losses.committed(part.partition, part.committed)
        if written or offsets:
            self.stats.checkpoints += 1

    async def _commit(self, offsets: dict[TopicPartition, int]) -> bool:
        """Commit; False when the group had moved on (fenced), True when committed."""
        consumer = self._consumer
        assert consumer is not None
        return await self._retry(
            partial(commit_unless_fenced, consumer, offsets, "monitor.commit_fenced"), "commit")

    # -- rebalancing ------------------------------------------------------------------
    async def on_revoked(self, revoked: list[TopicPartition]) -> None:
        """Checkpoint and set aside every revoked partition.

        aiokafka's eager protocol revokes everything on every rebalance; most partitions
        come straight back. They are kept aside (not processed: ``_process`` only sees
        ``_parts``) so ``on_assigned`` can resume them without reading the state topic.
        """
        ours = [tp.partition for tp in revoked if tp.topic == self.kafka.ticks_topic]
        async with self._lock:  # waits for the batch in flight
            try:
                await self._checkpoint(ours)  # the next owner starts exactly here
            except Exception as exc:
                # Safe: the next owner resumes from older states and the committed
                # offset, re-producing the same outputs.
                log.error("monitor.revoke_checkpoint_failed",
                          error=f"{type(exc).__name__}: {exc}"[:300])
            finally:
                for p in ours:
                    part = self._parts.pop(p, None)
                    if part is not None:
                        self._set_aside[p] = part
                    metrics.CONSUMER_LAG.labels("monitor", str(p)).set(0)
                metrics.ASSIGNED_PARTITIONS.labels("monitor").set(len(self._parts))
        if ours:
            log.info("monitor.partitions_revoked", partitions=sorted(ours))

    async def on_assigned(self, assigned: list[TopicPartition]) -> None:
        failure = await restore_or_failure(self._restore, assigned, "monitor.restore_failed")
        if failure is not None:
            self._fatal = failure

    async def _restore(self, assigned: list[TopicPartition]) -> None:
        k = self.kafka
        consumer = self._consumer
        assert consumer is not None
        async with self._lock:
            mine = sorted(tp.partition for tp in assigned if tp.topic == k.ticks_topic)
            positions: dict[int, int] = {}
            for p in mine:
                if p in self._parts:
                    continue
                tp = TopicPartition(k.ticks_topic, p)
                positions[p] = await self._retry(partial(start_offset, consumer, tp),
                                                 "start_offset")
            try:
                for p, position in positions.items():
                    self._losses.check_group_offset(k.ticks_topic, p, position)
            except BrokerLost as exc:
                self._broker_lost(exc)
                return
            kept = self._take_back(positions)
            new = [p for p in positions if p not in kept]
            states = await self._retry(
                lambda: read_states(self._state_reader, k.state_topic, new), "restore_state")
            restored = 0
            reread: dict[int, int] = {}
            for p in new:
                position = positions[p]
                part = PartitionState.restore(p, self.config.model, position, states[p],
                                              self._spread_gated)
                part.committed = position
                for key, state in states[p].items():
                    self._clock.restored(key, state.last_event_ts, p)
                restored += len(states[p])
                self._parts[p] = part
                if part.next_offset < position:
                    # Compact states left held ticks out: read them again. (aiokafka drops
                    # what it fetched from the committed offset meanwhile; a batch already
                    # handed out is dropped by _process, see _seeked.)
                    self._seek(p, part.next_offset)
                    reread[p] = position - part.next_offset
            self.stats.restored_tokens += restored
            self.joined.set()
            metrics.ASSIGNED_PARTITIONS.labels("monitor").set(len(self._parts))
        log.info("monitor.partitions_assigned", partitions=mine, restored_partitions=new,
                 kept_partitions=kept, restored_tokens=restored, reread_records=reread,
                 positions={p: self._parts[p].next_offset for p in mine if p in self._parts})

    def _seek(self, partition: int, offset: int) -> None:
        assert self._consumer is not None
        self._consumer.seek(TopicPartition(self.kafka.ticks_topic, partition), offset)
        self._seeks += 1
        self._seeked[partition] = self._seeks

    # -- broker loss (lost.py) ------------------------------------------------------------
    def _broker_lost(self, exc: BrokerLost) -> None:
        if self._fatal is None:
            log.error("monitor.broker_lost", error=str(exc),
                      action="exiting without committing; restart the monitor against the "
                             "new cluster (topics are recreated at start)")
            self._fatal = exc

    def _check_highwaters(self, consumer: AIOKafkaConsumer) -> None:
        for p, part in self._parts.items():
            tp = TopicPartition(self.kafka.ticks_topic, p)
            try:
                self._losses.check_highwater(tp.topic, p, consumer.highwater(tp),
                                             part.next_offset)
            except IllegalStateError:
                continue  # being revoked right now
            except BrokerLost as exc:
                self._broker_lost(exc)
                return

    def _check_topics(self, topics: set[str]) -> None:
        """From the readiness probe's metadata: our topics must still exist."""
        k = self.kafka
        missing = sorted({k.ticks_topic, k.state_topic} - topics)
        if missing and self._parts:
            self._broker_lost(BrokerLost(
                f"the broker lost topics {missing}: they no longer exist on it"))

    def _take_back(self, positions: dict[int, int]) -> list[int]:
        """Partitions set aside at revocation that came back untouched: resumed as they
        are. Untouched means the group's committed offset is exactly where this instance
        stopped (nobody else committed progress in between, and our final checkpoint
        succeeded); anything else is restored from the state topic. Partitions set aside
        and not assigned again are dropped."""
        kept = []
        for p, part in self._set_aside.items():
            if positions.get(p) == part.next_offset == part.committed:
                self._parts[p] = part
                kept.append(p)
            else:
                self._clock.forget(list(part.engine.keys()))
        self._set_aside.clear()
        return sorted(kept)

    def _state_reader(self) -> AIOKafkaConsumer:
        k = self.kafka
        return make_consumer(k, group_id=None, client_id=f"{k.client_id}-state-reader")

    # -- helpers ------------------------------------------------------------------------
    def _describe(self) -> str:
        tokens = sum(len(list(part.engine.keys())) for part in self._parts.values())
        return f"{len(self._parts)} partitions, {tokens} tokens"

    def _summary(self) -> dict[str, int]:
        s = self.stats
        return {"records": s.records, "ticks": s.ticks, "dead_letters": s.dead_letters,
                "tier_changes": s.tier_changes, "ratings": s.ratings,
                "checkpoints": s.checkpoints, "restored_tokens": s.restored_tokens}


async def _bounded(closing: Awaitable[None], what: str) -> None:
    """Close a client, but never wait forever for a broker that is gone."""
    try:
        await asyncio.wait_for(closing, SHUTDOWN_MARGIN_SECONDS)
    except (TimeoutError, KafkaError, OSError) as exc:
        log.warning("monitor.close_failed", client=what, error=type(exc).__name__)
