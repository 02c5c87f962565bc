"""``depeg-monitor spread``: the cross-chain spread stage on Kafka, and its ``run`` service.

One instance reads every partition of the ticks topic (an asset's chains live in different
partitions, so the stage cannot be split by partition; it is cheap: a few numbers per
tick). For each batch: decode and check each record exactly as the monitor does (a record
the monitor would dead-letter as malformed, wrongly keyed or future-dated is skipped
here), feed the pure stage, and publish the spread ticks it makes due into the ticks topic
under each token's own key.

Crash and restart (the monitor's semantics): every ``checkpoint_interval_seconds`` the
stage waits until the broker acknowledged every spread tick sent so far, then writes one
record to its compacted state topic: the stage's whole state and, for every partition,
the offset that state covers. A restart loads the newest such record and continues from
those offsets, so it republishes at most one checkpoint interval of spread ticks, byte for
byte; the monitor's engine drops the copies (same time, same values). Without a state
record the stage starts at the beginning of the ticks topic. See docs/cross-chain-spread.md.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import NewTopic
from aiokafka.errors import KafkaError

from .. import health, metrics
from ..config import Config
from ..daemon.brokercalls import BrokerCalls
from ..daemon.clients import start_assigned_consumer, start_producer
from ..daemon.publisher import Publisher
from ..daemon.retry import Aborted
from ..gcpolicy import service_started
from ..kafka.closing import close_all, close_bounded
from ..kafka.topics import admin_client, ensure_topics
from ..logs import get_logger
from ..registry import RegistryError
from ..services import Service
from ..ticks import BadTick, Tick, decode_tick, encode_tick
from ..timesanity import check_not_future
from .assets import AssetMap
from .feed import assets_for, make_stage
from .stage import SpreadStage

log = get_logger(__name__)

STATE_KEY = b"spread"
TOPIC_ALREADY_EXISTS = 36


class _Checkpoint(msgspec.Struct):
    version: int
    topic: str
    #: partition -> next offset to read; the stage state covers everything before.
    offsets: dict[int, int]
    stage: bytes
    written_at: float


class _BrokerLog:
    """Where the stage's broker failures go: the log only. Unlike the daemons, the stage's
    ``/readyz`` entry does not turn red while the broker is away (it says whether the
    stage restored its state), and a recovery is logged by the retry (``kafka.recovered``)."""

    def failure(self, what: str, exc: BaseException) -> None:
        log.warning("spread.broker_error", operation=what, error=f"{type(exc).__name__}: "
                    f"{exc}"[:300])

    def recovery(self, what: str) -> None:
        pass


class SpreadDaemon:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.kafka = config.kafka
        try:
            self.assets = assets_for(config)
            self.registry_error = ""
        except RegistryError as exc:
            self.assets, self.registry_error = AssetMap({}), str(exc)[:300]
        self.stage: SpreadStage | None = None
        self._positions: dict[int, int] = {}
        self._consumer: AIOKafkaConsumer | None = None
        self._stop = asyncio.Event()
        # started=True: a stop always grants the stage shutdown_grace_seconds, even before
        # its consumer is up (the daemons abort at once then); kept as the stage had it.
        self._broker_log = _BrokerLog()
        self._broker = BrokerCalls(self.kafka, self._broker_log, lambda: self._stop.is_set(),
                                   lambda: True)
        self._retry = self._broker.retry
        #: Set once the stage restored its state and holds every partition.
        self.ready = asyncio.Event()
        self.published = 0
        self.skipped = 0
        #: Records read since the stage last released what waited for a catch-up.
        self._unreleased = False
        self._counted = (0, 0)  # stage stats already exported (boundaries, late)
        self._newest: dict[str, float] = {}  # newest accepted market tick per token

    async def run(self, stop: asyncio.Event | None = None) -> None:
        if stop is not None:
            self._stop = stop
        if self.registry_error:
            log.error("spread.registry_unreadable", error=self.registry_error)
            health.register_check("spread", self.check)
            try:
                await self._stop.wait()
            finally:
                health.unregister_check("spread")
            return
        if not self.assets or self.config.model.refresh_seconds <= 0:
            reason = ("no asset is registered on two or more chains" if not self.assets
                      else "model.refresh_seconds is 0")
            log.info("spread.idle", reason=reason)
            self.ready.set()
            # Listed in /readyz all the same, so an operator sees the stage runs and why
            # it publishes nothing (an absent entry reads as "not started").
            with health.checking("spread", health.idle_check(reason)):
                await self._stop.wait()
            return
        self.stage = make_stage(self.config, self.assets)
        producer: AIOKafkaProducer | None = None
        consumer: AIOKafkaConsumer | None = None
        health.register_check("spread", self.check)
        try:
            k = self.kafka
            if k.create_topics:
                await self._retry(lambda: ensure_topics(k), "ensure_topics")
                await self._retry(self._ensure_state_topic, "ensure_state_topic")
            producer = await self._retry(partial(start_producer, k), "producer_start")
            publisher = self._broker.publisher(producer)
            consumer = await self._retry(
                partial(start_assigned_consumer, k, f"{k.client_id}-spread"), "consumer_start")
            self._consumer = consumer
            await self._retry(lambda: self._restore(consumer), "restore")
            self.ready.set()
            log.info("spread.started", assets=len(set(self.assets.asset_of.values())),
                     tokens=len(self.assets.asset_of), topic=k.ticks_topic,
                     positions=self._positions)
            service_started("spread", self.config.gc)
            await self._loop(consumer, publisher)
            self._broker.abort()  # starts the grace period for the final checkpoint
            await self._checkpoint(publisher)
            log.info("spread.stopped", published=self.published, skipped=self.skipped,
                     late=self.stage.stats.late)
        except Aborted as exc:
            log.error("spread.shutdown_incomplete", error=str(exc),
                      note="state not written; the next start repeats from the last one")
        finally:
            health.unregister_check("spread")
            await close_all((("consumer_stop", consumer), ("producer_stop", producer)),
                            "spread.close_failed")

    async def check(self) -> tuple[bool, str]:
        if self.registry_error:
            return False, f"token registry unreadable: {self.registry_error}"
        if not self.ready.is_set():
            return False, "restoring state"
        return True, f"{len(self._positions)} partitions, {self.published} published"

    # -- the loop ---------------------------------------------------------------------
    async def _loop(self, consumer: AIOKafkaConsumer, publisher: Publisher) -> None:
        k = self.kafka
        last_checkpoint = time.monotonic()
        while not self._stop.is_set():
            try:
                batch = await consumer.getmany(timeout_ms=k.batch_timeout_ms,
                                               max_records=k.batch_max_records)
            except KafkaError as exc:
                self._broker_log.failure("fetch", exc)
                await asyncio.sleep(self._broker.backoff().next_delay())
                continue
            for tp, records in batch.items():
                for rec in records:
                    await self._one(rec, publisher)
                highwater = consumer.highwater(tp)
                if highwater is not None:
                    metrics.CONSUMER_LAG.labels("spread", str(tp.partition)).set(
                        max(highwater - self._positions.get(tp.partition, 0), 0))
            if self._unreleased and self._caught_up():
                self._unreleased = False
                await self._release(publisher)
            self._export_metrics()
            if time.monotonic() - last_checkpoint >= k.checkpoint_interval_seconds:
                last_checkpoint = time.monotonic()
                await self._checkpoint(publisher)

    async def _one(self, rec: Any, publisher: Publisher) -> None:
        assert self.stage is not None
        if rec.offset < self._positions.get(rec.partition, 0):
            return  # already covered by the restored state
        self._positions[rec.partition] = rec.offset + 1
        self._unreleased = True
        try:
            tick = decode_tick(rec.value)
        except BadTick:
            self.skipped += 1  # the monitor dead-letters it; it is no input here either
            return
        if rec.key != tick.key.encode():
            self.skipped += 1
            return
        try:  # the monitor's bound on future-dated ticks (monitor/timesanity.py)
            check_not_future(tick, self._newest.get(tick.key), time.time(),
                             self.config.model.future_tolerance_seconds)
        except BadTick:
            self.skipped += 1
            return
        if tick.cross_chain_chains is None and tick.ts > self._newest.get(tick.key, -1e18):
            self._newest[tick.key] = tick.ts
        await self._publish(self.stage.process(tick, self._caught_up), publisher)

    async def _release(self, publisher: Publisher) -> None:
        """Publish the boundaries that waited only for this reader to catch up (it just
        has): nothing else would, until the next tick of their asset."""
        assert self.stage is not None
        await self._publish(self.stage.release(self._caught_up), publisher)

    async def _publish(self, outs: list[Tick], publisher: Publisher) -> None:
        for out in outs:
            await publisher.send(self.kafka.ticks_topic, encode_tick(out),
                                 key=out.key.encode(), kind="spread")
            self.published += 1

    def _export_metrics(self) -> None:
        assert self.stage is not None
        stats = self.stage.stats
        metrics.SPREAD_BOUNDARIES.inc(stats.boundaries - self._counted[0])
        metrics.SPREAD_LATE.inc(stats.late - self._counted[1])
        self._counted = (stats.boundaries, stats.late)
        for asset, seconds in self.stage.waiting().items():
            metrics.SPREAD_WAITING.labels(asset).set(seconds)

    def _caught_up(self) -> bool:
        """Has every partition been read up to what the broker last said it holds?"""
        consumer = self._consumer
        if consumer is None:
            return False
        for p, position in self._positions.items():
            highwater = consumer.highwater(TopicPartition(self.kafka.ticks_topic, p))
            if highwater is None or position < highwater:
                return False
        return True

    # -- state ------------------------------------------------------------------------
    async def _checkpoint(self, publisher: Publisher) -> None:
        assert self.stage is not None
        await publisher.flush()  # the state never runs ahead of acknowledged outputs
        record = _Checkpoint(version=1, topic=self.kafka.ticks_topic,
                             offsets=dict(self._positions), stage=self.stage.export_state(),
                             written_at=time.time())
        await publisher.send(self.config.spread.state_topic, msgspec.msgpack.encode(record),
                             key=STATE_KEY, partition=0, kind="state")
        await publisher.flush()

    async def _restore(self, consumer: AIOKafkaConsumer) -> None:
        assert self.stage is not None
        k = self.kafka
        await consumer.topics()
        parts = sorted(consumer.partitions_for_topic(k.ticks_topic) or ())
        if not parts:
            raise KafkaError(f"topic {k.ticks_topic} has no partitions yet")
        saved = await self._read_checkpoint()
        tps = [TopicPartition(k.ticks_topic, p) for p in parts]
        consumer.assign(tps)
        self._positions = {p: 0 for p in parts}
        if saved is not None and saved.topic == k.ticks_topic:
            self.stage.restore_state(saved.stage)
            self._positions.update(saved.offsets)
        for tp in tps:
            consumer.seek(tp, self._positions[tp.partition])
        log.info("spread.restored", from_state=saved is not None, positions=self._positions)

    async def _read_checkpoint(self) -> _Checkpoint | None:
        k = self.kafka
        reader = await start_assigned_consumer(k, f"{k.client_id}-spread-state")
        try:
            tp = TopicPartition(self.config.spread.state_topic, 0)
            reader.assign([tp])
            await reader.seek_to_beginning(tp)
            end = (await reader.end_offsets([tp]))[tp]
            newest: _Checkpoint | None = None
            while end and await reader.position(tp) < end:
                batch = await reader.getmany(tp, timeout_ms=1000, max_records=1000)
                if not batch:
                    break  # nothing more to fetch (the broker's end offset may overshoot)
                for rec in batch.get(tp, []):
                    if rec.value is None:
                        continue
                    try:
                        newest = msgspec.msgpack.decode(rec.value, type=_Checkpoint)
                    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                        log.error("spread.state_undecodable", offset=rec.offset,
                                  error=str(exc)[:200])
            return newest
        finally:
            await close_bounded(reader.stop(), "reader_stop", "spread.close_failed")

    async def _ensure_state_topic(self) -> None:
        k = self.kafka
        admin = admin_client(k)
        await admin.start()
        try:
            if self.config.spread.state_topic in set(await admin.list_topics()):
                return
            response = await admin.create_topics([NewTopic(
                self.config.spread.state_topic, 1, k.replication_factor,
                topic_configs={"cleanup.policy": "compact"})])
            for name, code, message in response.topic_errors:
                if code not in (0, TOPIC_ALREADY_EXISTS):
                    raise KafkaError(f"cannot create topic {name}: error {code} {message}")
        finally:
            await admin.close()


async def run_service(config: Config, stop: asyncio.Event) -> None:
    await SpreadDaemon(config).run(stop)


service = Service(name="spread", run=run_service, order=12)
