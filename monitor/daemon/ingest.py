"""The monitor daemon: consume ticks, run the engine, publish, checkpoint, commit.

Per batch (``getmany``), under one lock that the rebalance callbacks also take:

1. decode every record; a bad one becomes a dead letter (never stops the loop);
2. feed the partition's engine (``feed.Feed``, the per-tick loop); the batch's outputs
   (tier changes, rating snapshots) go to the producer together once the batch has run
   through the engine, dead letters after each partition's records, in the order found
   (neither is awaited per batch: the producer's futures are kept);
3. at most every ``checkpoint_interval_seconds`` (and on revoke and shutdown): wait until
   the broker acknowledged every record sent so far, write the state of every token that
   is due (``coverage.py``; every changed token on revoke and shutdown) to the state
   topic, wait for those too, and only then commit each partition's offset up to its
   first tick not inside its token's written state.

So offsets never run ahead of acknowledged outputs (at-least-once) nor of the state that
covers them (exact recovery, see ``state.py``); a crash re-produces at most
``state_max_age_seconds`` plus one checkpoint interval of outputs, byte for byte, with the
same event ids.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError
from prometheus_client import Gauge

from .. import health, metrics
from ..compiled import log_fields
from ..engine import Output
from ..kafka.fetched import Record
from ..kafka.topics import ensure_topics
from ..logs import get_logger
from ..ticks import BadTick, Tick
from ..timefmt import format_ts
from .assignment import Assignment
from .base import LOGGER
from .clients import start_group_consumer, start_producer
from .feed import Feed
from .lifecycle import summary
from .lost import BrokerLost
from .outputs import OutputWriter
from .rebalance import Listener
from .retry import Aborted

log = get_logger(LOGGER)

#: Closing the clients after a stop may take this long on top of the grace period.
SHUTDOWN_MARGIN_SECONDS = 5.0
#: The stopped line's figures, in its order.
SUMMARY = ("records", "ticks", "dead_letters", "tier_changes", "ratings", "checkpoints",
           "restored_tokens")


class MonitorDaemon(Assignment):
    """The loop and its lifecycle; what it runs on is set up in ``base.py``, and the
    checkpoint, rebalance and broker-loss paths it calls are the classes it extends."""

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
            self._out = OutputWriter(k, self._broker.publisher(producer), self.stats)
            listener = Listener(self.on_revoked, self.on_assigned)
            consumer = await self._retry(
                partial(start_group_consumer, k, k.monitor_group, k.ticks_topic, listener),
                "consumer_start")
            self._consumer = consumer
            probe = asyncio.create_task(self.readiness.probe(consumer, self._check_topics))
            log.info("monitor.started", bootstrap_servers=k.bootstrap_servers,
                     topic=k.ticks_topic, group=k.monitor_group, **log_fields())
            await self._loop(consumer)
            self._broker.abort()  # starts the grace period if it has not started yet
            async with self._lock:  # every changed token: the next start re-reads nothing
                await self._checkpoint(list(self._parts), everything=True)
            log.info("monitor.stopped", **self._summary())
        except Aborted as exc:
            log.error("monitor.shutdown_incomplete", error=str(exc),
                      note="offsets not committed; the next start re-processes from the "
                           "last commit (same event ids)")
        finally:
            await self._leave("monitor", probe, (("consumer_stop", consumer),
                                                 ("producer_stop", producer)),
                              SHUTDOWN_MARGIN_SECONDS)

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
        refused: list[tuple[Record, BadTick]] = []
        feed = Feed(self._clock, wall, tolerance, started, self._late_detail)
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
            engine_stats = part.engine.stats
            # Counted by the engine, one per take: the partition's ticks and late ones are
            # its counters' moves over the batch (no count kept per tick here).
            ticks_before, late_before = engine_stats.ticks, engine_stats.late
            feed.run(part, recs, tp.partition, produced, refused)
            # Dead letters in the order the loop found them (all on one topic).
            for rec, exc in refused:
                await out.dead_letter(rec, exc)
            refused.clear()
            # Nothing in the loop reads the position: it moves once per partition.
            part.next_offset = recs[-1].offset + 1
            ticks += engine_stats.ticks - ticks_before
            late += engine_stats.late - late_before
            highwater = self._consumer.highwater(tp) if self._consumer else None
            if highwater is not None:
                self._lag_gauge(tp.partition).set(max(highwater - part.next_offset, 0))
        if produced:
            await out.emit(produced)
        self.stats.skipped_restored += feed.skipped
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

    def _summary(self) -> dict[str, int]:
        return summary(self.stats, SUMMARY)
