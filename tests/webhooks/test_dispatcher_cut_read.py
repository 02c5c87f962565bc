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
from collections.abc import Awaitable, Callable, Sequence

import msgspec
import pytest
from aiohttp import web

import monitor.webhooks.dispatcher as dispatcher_module
from monitor.config import DeliveryConfig
from monitor.storage import Database
from monitor.storage.delivery_batches import CycleResult, Outcome, run_cycle
from monitor.storage.due_read import ClaimRequest
from monitor.webhooks.secrets import SecretBox
from monitor.webhooks.urls import origin
from tests.webhook_support import (
    ENCRYPTION_KEY,
    queue_for_new_subscription,
    receiver,
    running_dispatcher,
    wait_until,
)

BACKLOG = 300


def _config() -> DeliveryConfig:
    """One slot per endpoint, no poll to rescue a stalled read, no send timing out in a test."""
    return DeliveryConfig(allow_loopback=True, secret_encryption_key=ENCRYPTION_KEY,
                          max_concurrency=8, per_endpoint_concurrency=1,
                          poll_interval_seconds=3600.0, timeout_seconds=60.0)


def _recorded_cycles(monkeypatch: pytest.MonkeyPatch, keep: Callable[[], bool] = lambda: True
                     ) -> list[tuple[ClaimRequest, CycleResult]]:
    """Every claim the worker's cycles make, with its result, while ``keep()``. The
    cycle's own code runs: the claims are only recorded on their way through it."""
    seen: list[tuple[ClaimRequest, CycleResult]] = []

    async def recording(db: Database, outcomes: Sequence[Outcome],
                        claim: ClaimRequest | None) -> CycleResult:
        result = await run_cycle(db, outcomes, claim)
        if claim is not None and keep():
            seen.append((claim, result))
        return result

    monkeypatch.setattr(dispatcher_module, "run_cycle", recording)
    return seen


def _hang_until(release: asyncio.Event) -> Callable[
        [web.Request, bytes], Awaitable[web.StreamResponse | None]]:
    """A receiver handler that answers nothing until ``release`` is set."""
    async def hang(request: web.Request, body: bytes) -> web.StreamResponse | None:
        await release.wait()
        return None
    return hang


async def test_a_healthy_row_behind_a_full_endpoints_backlog_is_claimed(
        webhook_db: Database) -> None:
    config = _config()
    release = asyncio.Event()

    async with receiver() as hanging, receiver() as healthy:
        hanging.on_request = _hang_until(release)
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


async def test_behind_a_full_endpoint_the_read_skips_its_walk_until_it_has_room(
        webhook_db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind a hanging endpoint's backlog every walk meets its bound and finds nothing it
    may claim, so while that endpoint stays full the worker reads by subscription only;
    healthy rows are still delivered that way. The cycle's own code runs: the claims are
    only recorded on their way to it."""
    config = _config()
    release = asyncio.Event()
    # Not after the release at the end: the hanging endpoint's slot is freed then.
    seen = _recorded_cycles(monkeypatch, keep=lambda: not release.is_set())

    async with receiver() as hanging, receiver() as healthy:
        hanging.on_request = _hang_until(release)
        box = SecretBox.from_config(config)
        await queue_for_new_subscription(webhook_db, box, hanging.url, BACKLOG)
        async with running_dispatcher(webhook_db, config, box) as worker:
            try:
                await hanging.wait_requests(1)
                # Rows that come after the backlog, one event at a time.
                for n in range(1, 4):
                    await queue_for_new_subscription(webhook_db, box, healthy.url, 1)
                    worker.wake.set()
                    await healthy.wait_requests(n, within=15.0)
            finally:
                release.set()
    assert healthy.answered == [200, 200, 200]
    assert len(hanging.received) == 1  # its slot held all along
    skipped = [c for c, _ in seen if not c.walk]
    assert skipped, "no read skipped its walk behind the full endpoint"
    hanging_endpoint = origin(hanging.url)
    assert all(c.room.get(hanging_endpoint, c.default_room) <= 0 for c in skipped)


async def test_a_full_endpoints_freed_slot_does_not_walk_its_backlog_again(
        webhook_db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow endpoint with a backlog deeper than a walk's bound: each of its sends that
    ends frees a slot, and its next rows are claimed by subscription, oldest first,
    without walking its backlog again until the poll interval (an hour here) has
    passed. Walked at once, the backlog filled the read, the read was cut and a second
    cycle walked to the bound again, right after every send of it ended."""
    config = _config()
    gates = [asyncio.Event() for _ in range(4)]
    seen = _recorded_cycles(monkeypatch)

    async def one_at_a_time(request: web.Request, body: bytes) -> web.StreamResponse | None:
        await gates[min(len(slow.received), len(gates)) - 1].wait()
        return None  # then answered 200

    async with receiver() as slow, receiver() as healthy:
        slow.on_request = one_at_a_time
        box = SecretBox.from_config(config)
        await queue_for_new_subscription(webhook_db, box, slow.url, BACKLOG)
        async with running_dispatcher(webhook_db, config, box) as worker:
            try:
                await slow.wait_requests(1)
                for n in range(1, 4):
                    gates[n - 1].set()  # its send ends: a slot frees
                    await slow.wait_requests(n + 1)
                await queue_for_new_subscription(webhook_db, box, healthy.url, 1)
                worker.wake.set()
                await healthy.wait_requests(1)
            finally:
                for gate in gates:
                    gate.set()
    assert slow.answered[:3] == [200, 200, 200] and healthy.answered == [200]
    met_bound = [i for i, (c, r) in enumerate(seen) if c.walk and r.by_subscription]
    assert met_bound, "no walk met its bound behind the slow endpoint's backlog"
    after = [c for c, _ in seen[met_bound[0] + 1:]]
    assert after and not any(c.walk for c in after)
    slow_endpoint = origin(slow.url)
    assert any(c.room.get(slow_endpoint, c.default_room) > 0 for c in after)


async def test_walks_resume_once_the_full_endpoints_backlog_has_drained(
        webhook_db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """The skipping above lasts only while the backlog does: walks that meet their bound
    keep skipping, once a poll interval has passed, only while one does; after the
    backlog is delivered, the next walk finds the due rows short of its bound and every
    read walks again. A short poll here, so a walk is due soon after the drain."""
    config = msgspec.structs.replace(_config(), poll_interval_seconds=0.2)
    seen = _recorded_cycles(monkeypatch)

    async with receiver() as busy, receiver() as healthy:
        box = SecretBox.from_config(config)
        await queue_for_new_subscription(webhook_db, box, busy.url, BACKLOG)
        async with running_dispatcher(webhook_db, config, box) as worker:
            await busy.wait_requests(BACKLOG, within=60.0)
            drained = len(seen)
            await queue_for_new_subscription(webhook_db, box, healthy.url, 1)
            worker.wake.set()
            await healthy.wait_requests(1)

            async def walked_short_of_its_bound() -> bool:
                return any(c.walk and not r.by_subscription for c, r in seen[drained:])

            await wait_until(walked_short_of_its_bound, what="a walk after the drain")
            resumed = next(i for i, (c, r) in enumerate(seen) if i >= drained and c.walk
                           and not r.by_subscription)
            after = len(seen)
    assert set(busy.answered) == {200} and healthy.answered == [200]
    # The backlog was there: walks met their bound and reads skipped them meanwhile.
    assert any(c.walk and r.by_subscription for c, r in seen[:drained])
    assert any(not c.walk for c, _ in seen[:drained])
    # From the walk that found the backlog gone, every read walks.
    assert all(c.walk for c, _ in seen[resumed:after])
