"""A failing endpoint is probed one send at a time, with one slot's worth claimed for it.

With ``per_endpoint_concurrency`` slots each, a dead receiver held that many of the
worker's slots and brought the end of as many sends (a timeout, its failure's cycle, a
new connection) per timeout, each of which the healthy endpoints' sends waited behind on
the event loop. Now, once an endpoint's send fails, what is claimed for it from then on
goes one at a time, and at most ``CLAIM_AHEAD`` of its deliveries are claimed (a lease
counts on at most that many sends per slot ahead of it); its first success gives it its
slots back. Both backends, real receivers; the claims are read from the database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web

from monitor.config import DeliveryConfig
from monitor.storage import Database
from monitor.webhooks.dispatcher import CLAIM_AHEAD
from monitor.webhooks.secrets import SecretBox
from monitor.webhooks.urls import origin
from tests.webhook_support import (
    ENCRYPTION_KEY,
    Receiver,
    queue_for_new_subscription,
    receiver,
    running_dispatcher,
    wait_until,
)

SLOTS = 4
BACKLOG = 40


class Held:
    """Requests a receiver holds until the test answers them, by their number (from 1)."""

    def __init__(self, rec: Receiver, hold: set[int] | None = None, hold_from: int = 1,
                 status: int = 503) -> None:
        self.waiting: dict[int, asyncio.Future[int]] = {}
        self.hold, self.hold_from, self.status = hold or set(), hold_from, status
        self.releasing = False
        rec.on_request = self.on_request
        self._rec = rec

    async def on_request(self, request: web.Request, body: bytes) -> web.StreamResponse:
        n = len(self._rec.received)
        status = self.status
        if not self.releasing and (n in self.hold or n >= self.hold_from):
            answer = asyncio.get_running_loop().create_future()
            self.waiting[n] = answer
            status = await answer
        self._rec.answered.append(status)
        return web.Response(status=status)

    @property
    def open(self) -> list[int]:
        """The requests held now, unanswered."""
        return [n for n, f in self.waiting.items() if not f.done()]

    def answer(self, status: int) -> None:
        for n in self.open:
            self.waiting[n].set_result(status)

    @contextmanager
    def released_at_exit(self) -> Iterator[None]:
        try:
            yield
        finally:
            self.releasing = True
            self.answer(200)


async def _claimed(db: Database, url: str) -> int:
    """The endpoint's deliveries under a claim (leased, outcome not written)."""
    return int(await db.fetchval(
        "SELECT count(*) FROM webhook_deliveries d JOIN webhook_subscriptions s"
        " ON s.id = d.subscription_id WHERE s.endpoint = $1 AND d.lease_token IS NOT NULL",
        origin(url)))


async def test_a_failing_endpoint_is_probed_one_send_at_a_time(webhook_db: Database) -> None:
    config = DeliveryConfig(allow_loopback=True, secret_encryption_key=ENCRYPTION_KEY,
                            max_concurrency=8, per_endpoint_concurrency=SLOTS,
                            poll_interval_seconds=3600.0, timeout_seconds=60.0,
                            backoff_base_seconds=3600.0, backoff_max_seconds=3600.0)
    box = SecretBox.from_config(config)
    first_claim = SLOTS * CLAIM_AHEAD  # what the first claim takes of a healthy endpoint
    async with receiver() as failing, receiver() as healthy:
        # Its first SLOTS requests held, the rest of the first claim answered 503 at
        # once, and every request after that held until the test answers it.
        held = Held(failing, hold=set(range(1, SLOTS + 1)), hold_from=first_claim + 1)
        await queue_for_new_subscription(webhook_db, box, failing.url, BACKLOG)
        async with running_dispatcher(webhook_db, config, box) as worker:
            with held.released_at_exit():  # before the worker's stop waits for its sends
                # Healthy so far: as many sends at once as it has slots.
                await failing.wait_requests(SLOTS)
                assert len(held.open) == SLOTS
                held.answer(503)  # it fails: from here on it is probed
                # The rest of the first claim (claimed while it was healthy) is sent on
                # its full slots and fails at once; the next request is a probe's.
                await failing.wait_requests(first_claim + 1)
                probes = len(failing.received)
                # While the probe is held, cycles run and claim (for a healthy endpoint's
                # new events, which reach the failing one too), but nothing more is sent
                # to the failing endpoint, and no more than one slot's worth is claimed.
                for n in range(1, 3):
                    await queue_for_new_subscription(webhook_db, box, healthy.url, 1)
                    worker.wake.set()
                    await healthy.wait_requests(n * (n + 1) // 2)
                assert len(failing.received) == probes
                assert held.open == [probes]
                assert await _claimed(webhook_db, failing.url) <= CLAIM_AHEAD
                # Its probe succeeds: it has its slots again.
                held.answer(200)

                async def all_slots_busy() -> bool:
                    return len(held.open) == SLOTS

                await wait_until(all_slots_busy, what="the recovered endpoint's slots in use")
    assert failing.answered[:first_claim] == [503] * first_claim
    assert failing.answered[first_claim] == 200
    assert set(healthy.answered) == {200}
