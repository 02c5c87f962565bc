"""``depeg-monitor deliver``: tier changes from Kafka to signed webhook deliveries.

Two loops share one process:

* the *intake* consumes ``depeg.tier-changes`` (consumer group ``kafka.delivery_group``),
  matches each event against the active subscriptions, records the event and one pending
  delivery per match in the database, and only then commits the Kafka offsets — a crash
  in between re-reads the batch, and the UNIQUE (subscription, event) constraint makes
  the second pass a no-op;
* the :class:`~monitor.webhooks.dispatcher.Dispatcher` sends what is due, from the
  database, so pending retries survive restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import msgspec
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from monitor import health
from monitor.config import Config
from monitor.gcpolicy import service_started
from monitor.kafka.closing import close_bounded
from monitor.kafka.joining import start_unless_stopped
from monitor.kafka.topics import make_consumer
from monitor.logs import get_logger
from monitor.records import TierChangeEvent, decode_event, encode
from monitor.services import Service
from monitor.storage import Database, connect
from monitor.storage.deliveries import DeliveryStore, NewEvent
from monitor.storage.webhooks import Subscription, WebhookStore, migrate_webhooks
from monitor.webhooks import metrics
from monitor.webhooks.dispatcher import DeliveryAttempts, Dispatcher
from monitor.webhooks.secrets import SecretBox
from monitor.webhooks.sender import Sender

log = get_logger(__name__)
Clock = Callable[[], float]


def warn_if_loopback(config: Config) -> None:
    if config.delivery.allow_loopback:
        log.warning(
            "webhook.allow_loopback_enabled",
            message="DEVELOPMENT SETTING delivery.allow_loopback IS ON: http:// and loopback "
                    "webhook receivers are accepted. Never enable this in production.",
        )


def match(event: TierChangeEvent, subscriptions: list[Subscription]) -> list[Subscription]:
    """Active subscriptions for the event's type whose filters all match."""
    return [s for s in subscriptions
            if event.event_type in s.event_types and s.filters.matches(event.data)]


async def intake(consumer: AIOKafkaConsumer, subs: WebhookStore, deliveries: DeliveryStore,
                 config: Config, stop: asyncio.Event, wake: asyncio.Event,
                 clock: Clock) -> None:
    """Consume, record, then commit; a database failure rewinds to the committed offsets."""
    while not stop.is_set():
        try:
            batches = await consumer.getmany(timeout_ms=config.kafka.batch_timeout_ms,
                                             max_records=config.kafka.batch_max_records)
        except KafkaError as exc:
            # aiokafka retries most broker trouble itself; what reaches us is logged and
            # retried here, so a broker outage never ends the worker.
            metrics.consumer(len(consumer.assignment()), {}, None, False)
            log.error("delivery.fetch_failed", error=str(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)
            continue
        records = [r for batch in batches.values() for r in batch]
        if not records:
            metrics.consumer(len(consumer.assignment()), {}, None, True)
            continue
        started = time.monotonic()
        try:
            active = await subs.active_subscriptions()
            events: list[NewEvent] = []
            for record in records:
                try:
                    event = decode_event(record.value or b"")
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    # Not a tier change: say so with enough to find it, and move on.
                    metrics.undecodable()
                    log.error("delivery.tier_change_rejected", topic=record.topic,
                              partition=record.partition, offset=record.offset,
                              reason=str(exc)[:300])
                    continue
                matched = match(event, active)
                events.append(NewEvent(event.event_id, event.event_type, encode(event),
                                       matched))
            if events:
                created = await deliveries.record_events(events, clock())
                metrics.deliveries_created(created)
                if created:
                    wake.set()
                log.debug("delivery.tier_changes_recorded", events=len(events), deliveries=created)
            await consumer.commit()
            lag = {tp.partition: max(0, (consumer.highwater(tp) or 0) - (batch[-1].offset + 1))
                   for tp, batch in batches.items() if batch}
            metrics.consumer(len(consumer.assignment()), lag, time.monotonic() - started, True)
        except Exception as exc:
            log.error("delivery.intake_failed", error=str(exc), records=len(records))
            with contextlib.suppress(Exception):
                await consumer.seek_to_committed()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=1.0)


PRUNE_EVERY_SECONDS = 3600.0
GAUGES_EVERY_SECONDS = 15.0


async def backlog_gauges(store: DeliveryStore, stop: asyncio.Event) -> None:
    """Every 15 s: the retry backlog and failing-endpoint gauges (cheap counts)."""
    while not stop.is_set():
        try:
            metrics.backlog(*await store.backlog())
        except Exception as exc:
            log.warning("delivery.backlog_gauge_failed", error=str(exc))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=GAUGES_EVERY_SECONDS)


async def prune_history(store: DeliveryStore, config: Config, stop: asyncio.Event,
                        clock: Clock) -> None:
    """Hourly: delete finished delivery history past ``delivery.history_retention_days``."""
    days = config.delivery.history_retention_days
    while days > 0 and not stop.is_set():
        try:
            deleted = await store.prune(clock() - days * 86400.0)
            if deleted:
                log.info("delivery.history_pruned", deliveries=deleted, retention_days=days)
        except Exception as exc:
            log.error("delivery.history_prune_failed", error=str(exc))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=PRUNE_EVERY_SECONDS)


async def run_worker(config: Config, stop: asyncio.Event, clock: Clock = time.time,
                     db: Database | None = None) -> None:
    """The whole worker; returns after ``stop`` is set and in-flight sends finished."""
    warn_if_loopback(config)
    own_db = db is None
    db = db or await connect(config.storage.url)
    sender = Sender(config.delivery)
    consumer: AIOKafkaConsumer | None = None
    abandoned = False  # stopped while joining: its close may wait out the join (bounded)
    try:
        await migrate_webhooks(db)
        store = DeliveryStore(db)
        attempts = DeliveryAttempts(store, sender, SecretBox.from_config(config.delivery),
                                    config.delivery, clock=clock)
        dispatcher = Dispatcher(attempts)
        # Due retries are in the database: send them at once, without waiting for the
        # Kafka consumer to start (a restart after a crash can take a session timeout).
        tasks = [
            asyncio.create_task(dispatcher.run(stop)),
            asyncio.create_task(prune_history(store, config, stop, clock)),
            asyncio.create_task(backlog_gauges(store, stop)),
        ]
        try:
            # The [kafka] settings of every other consumer of the service (session and
            # heartbeat, poll interval, request timeout, client id) apply to this one too.
            consumer = make_consumer(
                config.kafka, config.kafka.tier_changes_topic,
                group_id=config.kafka.delivery_group,
                bootstrap_servers=config.kafka.bootstrap_servers or "127.0.0.1:9092")
            # Joining the group can take a dead member's session timeout; a stop asked
            # for meanwhile does not wait for it (the sends above still finish).
            joined = await start_unless_stopped(consumer, stop)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        if joined:
            log.info("delivery.worker_started", topic=config.kafka.tier_changes_topic,
                     group=config.kafka.delivery_group)
            service_started("delivery", config.gc)
            tasks.append(asyncio.create_task(intake(consumer, WebhookStore(db), store, config,
                                                    stop, dispatcher.wake, clock)))
        else:
            abandoned = True
            log.info("delivery.stopped_before_joining", group=config.kafka.delivery_group)
        with health.checking("deliver.store", health.store_check(db)):
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            stop.set()
            await asyncio.gather(*tasks)
    finally:
        if consumer is not None:
            await close_bounded(consumer.stop(), "consumer_stop", "delivery.join_abandoned"
                                if abandoned else "delivery.close_failed")
        await sender.close()
        if own_db:
            await db.close()
        log.info("delivery.worker_stopped")


service = Service(name="delivery", run=run_worker, order=60)
