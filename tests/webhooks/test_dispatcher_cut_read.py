"""A read cut at its limit is read on, even when every endpoint the worker holds is full.

A hanging endpoint's backlog is the oldest due rows, so a claim's read is filled by them
and cut at its limit. The worker reads on at once (``more_due``), and by then the hanging
endpoint has no room left, so the next read must leave it out and find the healthy
endpoint's row behind it. That next read used to be skipped ("only endpoints not held
yet could take more: the poll finds them"), and the healthy delivery waited for the next
event or the poll: a 30-70 ms p99 next to a hanging endpoint at 50 events/s, and here,
with no further event and an hour's poll, forever. Both backends, real receivers.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from monitor.config import DeliveryConfig
from monitor.storage import Database
from monitor.webhooks.secrets import SecretBox
from tests.webhook_support import (
    ENCRYPTION_KEY,
    queue_for_new_subscription,
    receiver,
    running_dispatcher,
)

BACKLOG = 300


async def test_a_healthy_row_behind_a_full_endpoints_backlog_is_claimed(
        webhook_db: Database) -> None:
    config = DeliveryConfig(allow_loopback=True, secret_encryption_key=ENCRYPTION_KEY,
                            max_concurrency=8, per_endpoint_concurrency=1,
                            poll_interval_seconds=3600.0, timeout_seconds=60.0)
    release = asyncio.Event()

    async def hang(request: web.Request, body: bytes) -> web.StreamResponse | None:
        await release.wait()
        return None

    async with receiver() as hanging, receiver() as healthy:
        hanging.on_request = hang
        box = SecretBox.from_config(config)
        # The backlog first (the oldest rows), then one event that both subscriptions
        # get: the healthy endpoint's only row, behind all of them.
        await queue_for_new_subscription(webhook_db, box, hanging.url, BACKLOG)
        await queue_for_new_subscription(webhook_db, box, healthy.url, 1)
        async with running_dispatcher(webhook_db, config, box):  # woken once, never again
            try:
                await hanging.wait_requests(1)
                await healthy.wait_requests(1, within=15.0)
            finally:
                release.set()
    assert healthy.answered == [200]
    # Everything the hanging endpoint got was its backlog's oldest rows: one slot.
    assert len(hanging.received) == 1
