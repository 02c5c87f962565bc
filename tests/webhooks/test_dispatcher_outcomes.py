"""A finished send's outcome is recorded promptly, even while its slot sends the next.

The worker gathers outcomes while every sender has a claimed delivery to send next, so a
busy drain writes them in fewer, larger cycles. That wait is bounded: here the slot's
next send hangs (its receiver holds the request for the test's whole length, far past
any wait the worker may take), and the first delivery must still be recorded a success
meanwhile, not when the hanging send ends. Checked on both backends, against the
database and the receiver's own count of requests.
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
    wait_until,
)


async def test_an_outcome_is_recorded_while_the_next_send_hangs(webhook_db: Database) -> None:
    # One slot at the endpoint, so the second delivery waits claimed behind the first
    # and its sender takes it straight away; four overall, so one outcome is not a
    # round's worth; the poll (an hour) never brings a cycle here.
    config = DeliveryConfig(allow_loopback=True, secret_encryption_key=ENCRYPTION_KEY,
                            max_concurrency=4, per_endpoint_concurrency=1,
                            poll_interval_seconds=3600.0, timeout_seconds=60.0)
    release = asyncio.Event()

    async def second_hangs(request: web.Request, body: bytes) -> web.StreamResponse | None:
        if len(rec.received) >= 2:
            await release.wait()
        return None

    async with receiver() as rec:
        rec.on_request = second_hangs
        box = SecretBox.from_config(config)
        await queue_for_new_subscription(webhook_db, box, rec.url, 2)
        async with running_dispatcher(webhook_db, config, box):
            try:
                await rec.wait_requests(2)  # the first answered, the second held open

                async def successes() -> int:
                    return int(await webhook_db.fetchval(
                        "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'success'")
                        or 0)

                async def first_recorded() -> bool:
                    return await successes() == 1

                await wait_until(first_recorded, 10, what="the first outcome recorded")
                assert not release.is_set() and len(rec.answered) == 1  # still hanging
                release.set()

                async def both_recorded() -> bool:
                    return await successes() == 2

                await wait_until(both_recorded, 30, what="the second outcome recorded")
            finally:
                release.set()
    assert rec.answered == [200, 200]
