"""A burst larger than what the worker claims ahead is sent without waiting for the poll.

The due query only runs when something may be claimable; a claim that fills an
endpoint's room leaves that endpoint's other due rows behind. A slot freed there must
bring the next read, or the rest of the burst waits for ``poll_interval_seconds``
(here an hour, so a stall shows as a delivery never made). Checked against the
receiver's own count of requests, on both backends.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from webhook_support import ENCRYPTION_KEY, new_key, receiver, tier_change, wait_until

from monitor.config import DeliveryConfig
from monitor.records import encode
from monitor.storage import Database, connect
from monitor.storage.deliveries import DeliveryStore, NewEvent
from monitor.storage.webhooks import WebhookStore, migrate_webhooks
from monitor.webhooks.dispatcher import DeliveryAttempts, Dispatcher
from monitor.webhooks.filters import Filters
from monitor.webhooks.secrets import SecretBox
from monitor.webhooks.sender import Sender
from monitor.webhooks.urls import origin

#: More than one endpoint claims ahead (CLAIM_AHEAD x 1 slot), fewer than one read takes.
BURST = 3


@pytest.fixture
async def db(storage_url: str) -> AsyncIterator[Database]:
    database = await connect(storage_url)
    await migrate_webhooks(database)
    try:
        yield database
    finally:
        await database.close()


async def test_a_burst_is_sent_without_waiting_for_the_poll(db: Database) -> None:
    config = DeliveryConfig(allow_loopback=True, secret_encryption_key=ENCRYPTION_KEY,
                            max_concurrency=1, per_endpoint_concurrency=1,
                            poll_interval_seconds=3600.0)
    _, key_id = await new_key(db)
    async with receiver() as rec:
        box = SecretBox.from_config(config)
        sid = str(uuid.uuid4())
        await WebhookStore(db).create_subscription(
            sub_id=sid, api_key_id=key_id, webhook_url=rec.url, endpoint=origin(rec.url),
            event_types=["DEPEG_TIER_CHANGE"], filters=Filters(),
            secret_sealed=box.seal("s" * 32, sid), now=time.time())
        subs = await WebhookStore(db).active_subscriptions()
        events = [tier_change() for _ in range(BURST)]
        await DeliveryStore(db).record_events(
            [NewEvent(e.event_id, e.event_type, encode(e), subs) for e in events], time.time())
        sender = Sender(config)
        dispatcher = Dispatcher(DeliveryAttempts(DeliveryStore(db), sender, box, config))
        stop = asyncio.Event()
        dispatcher.wake.set()  # as the intake does after recording deliveries
        runner = asyncio.create_task(dispatcher.run(stop))
        try:
            async def all_done() -> bool:
                return int(await db.fetchval(
                    "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'success'")
                    or 0) == BURST

            await wait_until(all_done, 30, what="every delivery of the burst sent")
        finally:
            stop.set()
            await asyncio.gather(runner, return_exceptions=True)
            await sender.close()
    sent = sorted(json.loads(r.body)["event"]["event_id"] for r in rec.received)
    assert sent == sorted(e.event_id for e in events)
