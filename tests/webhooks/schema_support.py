"""What an older release's stores wrote, for the schema-upgrade tests: their databases are
filled with the statements of that release, not with the stores' newer code."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

from monitor.config import DeliveryConfig
from monitor.storage import Database
from monitor.storage.deliveries import NewEvent, delivery_id
from monitor.storage.webhooks import Subscription, WebhookStore
from monitor.webhooks.apikeys import new_api_key
from monitor.webhooks.filters import Filters
from monitor.webhooks.secrets import SecretBox
from tests.webhook_support import ENCRYPTION_KEY


async def key_with_subscriptions(db: Database, count: int) -> list[Subscription]:
    """A new API key with ``count`` active subscriptions (the subscription tables have
    not changed since version 1)."""
    store = WebhookStore(db)
    key = await store.create_api_key("old", new_api_key(), time.time())
    box = SecretBox.from_config(DeliveryConfig(secret_encryption_key=ENCRYPTION_KEY))
    for _ in range(count):
        sid = str(uuid.uuid4())
        await store.create_subscription(
            sub_id=sid, api_key_id=key.id, webhook_url="https://example.com/h",
            endpoint="https://example.com:443", event_types=["DEPEG_TIER_CHANGE"],
            filters=Filters(), secret_sealed=box.seal("whsec_x", sid), now=time.time())
    return [s for s in await store.active_subscriptions() if s.api_key_id == key.id]


async def record_events_unnumbered(db: Database, events: Sequence[NewEvent],
                                   now: float) -> None:
    """What ``DeliveryStore.record_events`` wrote before version 5 numbered deliveries:
    the events, a pending delivery per subscription, one compute unit each."""
    for e in events:
        await db.execute("INSERT INTO webhook_events (event_id, event_type, payload,"
                         " received_at) VALUES ($1, $2, $3, $4)",
                         e.event_id, e.event_type, e.payload.decode(), now)
        for sub in e.subscriptions:
            did = delivery_id(sub.id, e.event_id)
            await db.execute(
                "INSERT INTO webhook_deliveries (id, subscription_id, api_key_id, event_id,"
                " event_type, status, attempts, next_attempt_at, created_at, updated_at)"
                " VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6, $6)",
                did, sub.id, sub.api_key_id, e.event_id, e.event_type, now)
            await db.execute(
                "INSERT INTO cu_ledger (id, api_key_id, kind, ref, units, created_at)"
                " VALUES ($1, $2, 'delivery', $3, 1, $4)",
                str(uuid.uuid4()), sub.api_key_id, did, now)
