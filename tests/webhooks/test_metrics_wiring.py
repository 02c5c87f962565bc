"""Delivery updates the project's metrics (docs/metrics.md) once ``monitor.metrics`` exists."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from monitor.config import DeliveryConfig
from monitor.records import encode
from monitor.storage import connect
from monitor.storage.deliveries import DeliveryStore, NewEvent
from monitor.storage.webhooks import WebhookStore
from monitor.webhooks import metrics as hooks
from monitor.webhooks.dispatcher import DeliveryAttempts
from monitor.webhooks.filters import Filters
from monitor.webhooks.secrets import SecretBox
from monitor.webhooks.sender import Sender
from monitor.webhooks.urls import origin
from tests.webhook_support import ENCRYPTION_KEY, new_key, receiver, tier_change


def test_outcome_labels() -> None:
    assert hooks.outcome(204, None) == "success"
    assert hooks.outcome(503, "HTTP 503") == "http_5xx"
    assert hooks.outcome(404, "HTTP 404") == "http_4xx"
    assert hooks.outcome(302, "HTTP 302") == "http_4xx"
    assert hooks.outcome(None, "timeout after 10s") == "timeout"
    assert hooks.outcome(None, "blocked: private address") == "blocked"
    assert hooks.outcome(None, "connect error: refused") == "connection_error"


async def test_attempts_update_the_metrics_module(tmp_path: Path) -> None:
    m: Any = pytest.importorskip("monitor.metrics")

    def value(metric: Any, *labels: str) -> float:
        return float((metric.labels(*labels) if labels else metric)._value.get())

    config = DeliveryConfig(allow_loopback=True, secret_encryption_key=ENCRYPTION_KEY)
    db = await connect(f"sqlite:///{tmp_path / 'm.db'}")
    sender = Sender(config)
    try:
        _, key_id = await new_key(db)
        async with receiver([500, 200]) as rec:
            sid = str(uuid.uuid4())
            box = SecretBox.from_config(config)
            await WebhookStore(db).create_subscription(
                sub_id=sid, api_key_id=key_id, webhook_url=rec.url, endpoint=origin(rec.url),
                event_types=["DEPEG_TIER_CHANGE"], filters=Filters(),
                secret_sealed=box.seal("s", sid), now=time.time())
            store = DeliveryStore(db)
            event = tier_change()
            subs = await WebhookStore(db).active_subscriptions()
            created = await store.record_events(
                [NewEvent(event.event_id, event.event_type, encode(event), subs)], time.time())
            hooks.deliveries_created(created)
            before = (value(m.DELIVERY_ATTEMPTS, "http_5xx"), value(m.DELIVERY_ATTEMPTS, "success"),
                      value(m.DELIVERIES, "success"), value(m.CU_CONSUMED, "delivery"))
            attempts = DeliveryAttempts(store, sender, box, config)
            for _ in range(2):
                (due,) = await store.due(time.time() + 3600, 10)
                assert await store.claim(due.id, "t", time.time(), time.time() + 60)
                await attempts.attempt(due, "t")
        after = (value(m.DELIVERY_ATTEMPTS, "http_5xx"), value(m.DELIVERY_ATTEMPTS, "success"),
                 value(m.DELIVERIES, "success"), value(m.CU_CONSUMED, "delivery"))
        assert after[0] == before[0] + 1 and after[1] == before[1] + 1
        assert after[2] == before[2] + 1 and after[3] == before[3]
    finally:
        await sender.close()
        await db.close()
