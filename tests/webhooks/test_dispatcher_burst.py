"""A burst larger than what the worker claims ahead is sent without waiting for the poll.

The due query only runs when something may be claimable; a claim that fills an
endpoint's room leaves that endpoint's other due rows behind. A slot freed there must
bring the next read, or the rest of the burst waits for ``poll_interval_seconds``
(here an hour, so a stall shows as a delivery never made). Checked against the
receiver's own count of requests, on both backends.
"""

from __future__ import annotations

import json

from monitor.config import DeliveryConfig
from monitor.storage import Database
from monitor.webhooks.dispatcher import CLAIM_AHEAD
from monitor.webhooks.secrets import SecretBox
from tests.webhook_support import (
    ENCRYPTION_KEY,
    queue_for_new_subscription,
    receiver,
    running_dispatcher,
    wait_until,
)

#: More than one endpoint claims ahead (CLAIM_AHEAD x 1 slot), so more than one read
#: takes (READ_SLACK x CLAIM_AHEAD rows): the rest comes with the read cut at its limit.
BURST = CLAIM_AHEAD + 1


async def test_a_burst_is_sent_without_waiting_for_the_poll(webhook_db: Database) -> None:
    config = DeliveryConfig(allow_loopback=True, secret_encryption_key=ENCRYPTION_KEY,
                            max_concurrency=1, per_endpoint_concurrency=1,
                            poll_interval_seconds=3600.0)
    async with receiver() as rec:
        box = SecretBox.from_config(config)
        events = await queue_for_new_subscription(webhook_db, box, rec.url, BURST)
        async with running_dispatcher(webhook_db, config, box):
            async def all_done() -> bool:
                return int(await webhook_db.fetchval(
                    "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'success'")
                    or 0) == BURST

            await wait_until(all_done, 30, what="every delivery of the burst sent")
    sent = sorted(json.loads(r.body)["event"]["event_id"] for r in rec.received)
    assert sent == sorted(e.event_id for e in events)
