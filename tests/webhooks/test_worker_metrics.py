"""The worker's metrics, counted per cycle, against what the receiver saw.

The dispatcher increments the attempt and status counters once per cycle and label
(``DeliveryAttempts.report_cycle``), not once per send. Whatever the batching, each
attempt must be counted once under its outcome, each failed attempt once as a retry
scheduled, each delivery once as a success; the truth is the receiver's own list of
the answers it gave. On both backends.
"""

from __future__ import annotations

import asyncio
from typing import Any

from monitor import metrics as m
from monitor.config import DeliveryConfig
from monitor.storage import Database
from monitor.storage.deliveries import DeliveryStore
from monitor.webhooks.dispatcher import DeliveryAttempts, Dispatcher
from monitor.webhooks.secrets import SecretBox
from monitor.webhooks.sender import Sender
from tests.webhook_support import ENCRYPTION_KEY, queue_for_new_subscription, receiver, wait_until

DELIVERIES = 6
FAILURES = 4  # the receiver's first answers are 500s, then 200s


def value(metric: Any, *labels: str) -> float:
    return float((metric.labels(*labels) if labels else metric)._value.get())


def observations(histogram: Any) -> float:
    return float(sum(s.value for family in histogram.collect() for s in family.samples
                     if s.name.endswith("_count")))


def snapshot() -> dict[str, float]:
    return {"5xx": value(m.DELIVERY_ATTEMPTS, "http_5xx"),
            "2xx": value(m.DELIVERY_ATTEMPTS, "success"),
            "timed": observations(m.ATTEMPT_SECONDS),
            "delivered": observations(m.DELIVERY_LATENCY),
            "success": value(m.DELIVERIES, "success"),
            "failed": value(m.DELIVERIES, "failed"),
            "retries": value(m.RETRIES_SCHEDULED)}


async def test_counters_per_cycle_match_the_receivers_answers(webhook_db: Database) -> None:
    database = webhook_db
    config = DeliveryConfig(allow_loopback=True, secret_encryption_key=ENCRYPTION_KEY,
                            backoff_base_seconds=0.01, backoff_max_seconds=0.02,
                            poll_interval_seconds=0.05)
    async with receiver([500] * FAILURES + [200]) as rec:
        box = SecretBox.from_config(config)
        await queue_for_new_subscription(database, box, rec.url, DELIVERIES)
        sender = Sender(config)
        dispatcher = Dispatcher(DeliveryAttempts(DeliveryStore(database), sender, box, config))
        before = snapshot()
        stop = asyncio.Event()
        dispatcher.wake.set()
        runner = asyncio.create_task(dispatcher.run(stop))
        try:
            async def all_done() -> bool:
                return int(await database.fetchval(
                    "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'success'")
                    or 0) == DELIVERIES

            await wait_until(all_done, 30, what="every delivery made")
        finally:
            stop.set()  # the stop writes (and counts) every outcome still pending
            await asyncio.gather(runner, return_exceptions=True)
            await sender.close()
    after = snapshot()
    delta = {k: after[k] - before[k] for k in after}
    answered = rec.answered
    assert answered.count(500) == FAILURES and answered.count(200) == DELIVERIES
    assert delta == {"5xx": FAILURES, "2xx": DELIVERIES, "timed": len(answered),
                     "delivered": DELIVERIES, "success": DELIVERIES, "failed": FAILURES,
                     "retries": FAILURES}
