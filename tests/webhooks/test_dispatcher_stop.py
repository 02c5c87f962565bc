"""A clean stop gives back what the worker claimed ahead but never sent.

The dispatcher claims sends ahead of each slot (the attempt is counted at the claim, before
any request goes out). A delivery still waiting for a slot when the worker stops was never
sent: its attempt is uncounted (its history row is only written with an outcome), so it reads as
if never claimed. Checked against the receiver's own count of requests, on both backends.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from monitor.config import DeliveryConfig
from monitor.storage import Database
from monitor.storage.deliveries import DeliveryStore
from monitor.webhooks.dispatcher import CLAIM_AHEAD, DeliveryAttempts, Dispatcher
from monitor.webhooks.secrets import SecretBox
from monitor.webhooks.sender import Sender
from tests.webhook_support import (
    ENCRYPTION_KEY,
    attempt_history,
    queue_for_new_subscription,
    receiver,
    wait_until,
)


async def test_claimed_but_unsent_deliveries_are_given_back_on_stop(webhook_db: Database) -> None:
    config = DeliveryConfig(allow_loopback=True, secret_encryption_key=ENCRYPTION_KEY,
                            max_concurrency=1, per_endpoint_concurrency=1,
                            timeout_seconds=5.0)
    release = asyncio.Event()
    async with receiver() as rec:
        async def held(_request: web.Request, _body: bytes) -> None:
            await release.wait()  # the first send stays in flight until the stop

        rec.on_request = held
        box = SecretBox.from_config(config)
        await queue_for_new_subscription(webhook_db, box, rec.url, 5)
        sender = Sender(config)
        dispatcher = Dispatcher(DeliveryAttempts(DeliveryStore(webhook_db), sender, box, config))
        stop = asyncio.Event()
        runner = asyncio.create_task(dispatcher.run(stop))
        try:
            await rec.wait_requests(1)

            async def claimed_ahead() -> bool:
                return dispatcher.ready == CLAIM_AHEAD - 1

            await wait_until(claimed_ahead, what="a delivery claimed ahead of its slot")
            counted = await webhook_db.fetchval("SELECT SUM(attempts) FROM webhook_deliveries")
            assert counted == CLAIM_AHEAD  # counted before sending, in flight or not
            stop.set()
            release.set()
            await runner
        finally:
            release.set()
            stop.set()
            await asyncio.gather(runner, return_exceptions=True)
            await sender.close()
    assert len(rec.received) == 1, "the receiver's own count of requests"
    rows = await webhook_db.fetch(
        "SELECT id, status, attempts, lease_token FROM webhook_deliveries")
    assert sorted((r["status"], r["attempts"]) for r in rows) == (
        [("pending", 0)] * 4 + [("success", 1)])
    assert all(r["lease_token"] is None for r in rows)
    sent = next(r["id"] for r in rows if r["status"] == "success")
    assert await attempt_history(webhook_db) == [(sent, 1, 200, None)]
