"""A failing endpoint is probed one send at a time, with one slot's worth claimed for it.

With ``per_endpoint_concurrency`` slots each, a dead receiver held that many of the
worker's slots and brought the end of as many sends (a timeout, its failure's cycle, a
new connection) per timeout, each of which the healthy endpoints' sends waited behind on
the event loop. Now, once an endpoint's send fails, its deliveries claimed and not sent
are given back uncounted (they were claimed for all its slots), its sends go one at a
time after a failure and one more at once per success in a row, and ``CLAIM_AHEAD`` of
its deliveries are claimed per send it may have in flight (a lease counts on at most
that many sends per slot ahead of it); two successes in a row give it its slots back
(one did not hold a receiver that fails every other request in the probe). Failing
again while probed, it keeps what it holds (claimed inside the failing share), and none
of it is sent past its lease.
Both backends, real receivers; claims and attempts are read from the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager

import pytest
from aiohttp import web
from prometheus_client import REGISTRY, generate_latest

import monitor.webhooks.dispatcher as dispatcher_module
from monitor.config import DeliveryConfig
from monitor.storage import Database
from monitor.storage.delivery_batches import CycleResult, Outcome, run_cycle
from monitor.storage.due_read import ClaimRequest
from monitor.webhooks.dispatcher import CLAIM_AHEAD, Dispatcher, failing_share
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


def _config(max_concurrency: int = 8, per_endpoint: int = SLOTS,
            backoff: float = 3600.0, timeout: float = 60.0,
            lease_margin: float = 30.0) -> DeliveryConfig:
    """No poll and (by default) no timeout to act in a test; retries after ``backoff``
    seconds."""
    return DeliveryConfig(allow_loopback=True, secret_encryption_key=ENCRYPTION_KEY,
                          max_concurrency=max_concurrency,
                          per_endpoint_concurrency=per_endpoint, poll_interval_seconds=3600.0,
                          timeout_seconds=timeout, backoff_base_seconds=backoff,
                          backoff_max_seconds=backoff, lease_margin_seconds=lease_margin)


class Held:
    """A receiver's requests, each held until the test answers it; by number (from 1)."""

    def __init__(self, rec: Receiver) -> None:
        self.waiting: dict[int, asyncio.Future[int]] = {}
        self.releasing = False
        rec.on_request = self.on_request
        self._rec = rec

    async def on_request(self, request: web.Request, body: bytes) -> web.StreamResponse:
        status = 200
        if not self.releasing:
            answer = asyncio.get_running_loop().create_future()
            self.waiting[len(self._rec.received)] = answer
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

    def answer_first(self, status: int) -> None:
        """Answer the oldest request held."""
        self.waiting[min(self.open)].set_result(status)

    @contextmanager
    def released_at_exit(self) -> Iterator[None]:
        try:
            yield
        finally:
            self.releasing = True
            self.answer(200)


def _holding(held: Held, n: int) -> Callable[[], Awaitable[bool]]:
    """For wait_until: whether ``held`` holds ``n`` requests now."""
    async def check() -> bool:
        return len(held.open) == n
    return check


async def _claimed(db: Database, url: str) -> int:
    """The endpoint's deliveries under a claim (leased, outcome not written)."""
    return int(await db.fetchval(
        "SELECT count(*) FROM webhook_deliveries d JOIN webhook_subscriptions s"
        " ON s.id = d.subscription_id WHERE s.endpoint = $1 AND d.lease_token IS NOT NULL",
        origin(url)))


async def _attempts(db: Database, url: str) -> int:
    """Attempts counted on the endpoint's deliveries."""
    return int(await db.fetchval(
        "SELECT COALESCE(sum(d.attempts), 0) FROM webhook_deliveries d"
        " JOIN webhook_subscriptions s ON s.id = d.subscription_id WHERE s.endpoint = $1",
        origin(url)))


def _probed_gauge() -> float:
    """``depeg_delivery_probed_endpoints`` as this process exports it."""
    return float(generate_latest(REGISTRY).decode().split(
        "\ndepeg_delivery_probed_endpoints ", 1)[1].split("\n", 1)[0])


async def test_a_failing_endpoint_is_probed_one_send_at_a_time(webhook_db: Database) -> None:
    config = _config()
    box = SecretBox.from_config(config)
    async with receiver() as failing, receiver() as healthy:
        held = Held(failing)
        await queue_for_new_subscription(webhook_db, box, failing.url, BACKLOG)
        async with running_dispatcher(webhook_db, config, box) as worker:
            with held.released_at_exit():  # before the worker's stop waits for its sends
                # Healthy so far: as many sends at once as it has slots (and three times
                # as many more claimed behind them).
                await failing.wait_requests(SLOTS)
                assert len(held.open) == SLOTS
                held.answer(503)  # it fails: from here on it is probed
                # What was claimed behind its first sends is given back; its next
                # request is a probe's.
                await failing.wait_requests(SLOTS + 1)
                probes = SLOTS + 1
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
                assert _probed_gauge() == 1  # set by the cycles that just ran
                # Its probe succeeds: one success is not yet a recovery; it may have
                # two requests in flight now, no more.
                held.answer(200)
                await failing.wait_requests(probes + 2)
                for n in range(3, 5):  # cycles run: the worker could send more now
                    await queue_for_new_subscription(webhook_db, box, healthy.url, 1)
                    worker.wake.set()
                    await healthy.wait_requests(n * (n + 1) // 2)
                assert held.open == [probes + 1, probes + 2]
                # A second success in a row: it has its slots again.
                held.answer_first(200)

                async def all_slots_busy() -> bool:
                    return len(held.open) == SLOTS

                await wait_until(all_slots_busy, what="the recovered endpoint's slots in use")

                async def not_probed() -> bool:
                    return _probed_gauge() == 0

                await wait_until(not_probed, what="the gauge to read no receiver probed")
    assert failing.answered[:SLOTS] == [503] * SLOTS
    assert failing.answered[SLOTS:SLOTS + 2] == [200, 200]
    assert set(healthy.answered) == {200}
    # The deliveries given back at the failure were given back uncounted: every attempt
    # counted is a request the receiver got (the stop gave back the rest).
    assert await _attempts(webhook_db, failing.url) == len(failing.received)


async def test_a_claim_asked_for_before_the_failure_gives_back_what_it_brings(
        webhook_db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim on its way when the endpoint fails was given a healthy endpoint's room:
    what it brings for that endpoint is given back, not queued behind one slot. The
    claim is held on its way (the cycle's own code runs) until the failure is seen."""
    config = _config()
    box = SecretBox.from_config(config)
    on_its_way, go_on, failed = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async with receiver() as failing, receiver() as healthy:
        endpoint = origin(failing.url)

        async def held_claim(db: Database, outcomes: Sequence[Outcome],
                             claim: ClaimRequest | None) -> CycleResult:
            if claim is not None and not go_on.is_set() \
                    and claim.room.get(endpoint, claim.default_room) > 0:
                on_its_way.set()
                await go_on.wait()
            return await run_cycle(db, outcomes, claim)

        real_failed = Dispatcher._failed

        def seen_failing(self: Dispatcher, endpoint: str) -> None:
            real_failed(self, endpoint)
            failed.set()

        monkeypatch.setattr(Dispatcher, "_failed", seen_failing)
        held = Held(failing)
        await queue_for_new_subscription(webhook_db, box, failing.url, SLOTS)
        async with running_dispatcher(webhook_db, config, box) as worker:
            with held.released_at_exit():
                await failing.wait_requests(SLOTS)  # its slots full, nothing claimed ahead
                monkeypatch.setattr(dispatcher_module, "run_cycle", held_claim)
                await queue_for_new_subscription(webhook_db, box, failing.url, 2 * SLOTS)
                worker.wake.set()
                await on_its_way.wait()  # a claim with room for it, asked while healthy
                held.answer(503)
                await failed.wait()
                go_on.set()
                await failing.wait_requests(SLOTS + 1)  # a probe
                await queue_for_new_subscription(webhook_db, box, healthy.url, 1)
                worker.wake.set()
                await healthy.wait_requests(1)
                assert held.open == [SLOTS + 1]
                assert await _claimed(webhook_db, failing.url) <= CLAIM_AHEAD
    assert await _attempts(webhook_db, failing.url) == len(failing.received)


async def test_failing_endpoints_together_hold_at_most_half_the_slots(
        webhook_db: Database) -> None:
    """Enough dead receivers held every claim the worker may make, and a healthy
    endpoint's rows were not claimed at all (minutes of delay with 16 of them at the
    defaults). Failing endpoints together now hold at most half the worker's slots, in
    turns: four dead receivers on a four-slot worker leave two slots and their claims
    to a healthy one."""
    config = _config(max_concurrency=4, per_endpoint=1)
    box = SecretBox.from_config(config)
    async with contextlib.AsyncExitStack() as stack:
        dead = [await stack.enter_async_context(receiver()) for _ in range(4)]
        healthy = await stack.enter_async_context(receiver())
        held = [Held(r) for r in dead]
        for r in dead:
            await queue_for_new_subscription(webhook_db, box, r.url, 5)
        async with running_dispatcher(webhook_db, config, box) as worker:
            with contextlib.ExitStack() as releases:
                for h in held:
                    releases.enter_context(h.released_at_exit())
                for r in dead:  # one slot each: all four slots
                    await r.wait_requests(1)
                for h in held:
                    h.answer(503)  # all four fail

                def probes() -> int:
                    return sum(len(h.open) for h in held)

                async def probing() -> bool:
                    return probes() > 0

                await wait_until(probing, what="a probe")
                for n in range(1, 3):  # (each also reaches the dead receivers)
                    await queue_for_new_subscription(webhook_db, box, healthy.url, 1)
                    worker.wake.set()
                    await healthy.wait_requests(n * (n + 1) // 2)
                assert 0 < probes() <= failing_share(config.max_concurrency)
                claimed = [await _claimed(webhook_db, r.url) for r in dead]
                assert sum(claimed) <= failing_share(config.max_concurrency)
                # The probes' endpoints fail again: the others get their turn.
                first = {i for i, h in enumerate(held) if h.open}
                for h in held:
                    h.answer(503)

                async def others_probed() -> bool:
                    return any(held[i].open for i in set(range(4)) - first)

                await wait_until(others_probed, what="the other dead receivers' turn")
                assert probes() <= failing_share(config.max_concurrency)
    assert set(healthy.answered) == {200}
    for r in dead:
        assert await _attempts(webhook_db, r.url) == len(r.received)


async def test_a_receiver_failing_every_other_request_stays_probed(
        webhook_db: Database) -> None:
    """A flapping receiver (503 and 200 in turn) never has two successes in a row, so it
    stays in the probe: one request in flight after a failure, two after a success,
    however many of its deliveries wait. Let out at each success, it got its slots
    back, sent its waiting retries at once and failed again, and a healthy neighbour's
    p99 rose by ~45 % (bench_delivery.py --neighbours flap). Its deliveries still go
    through. After each answer a healthy endpoint's event is delivered twice over (each
    event reaches both subscriptions): cycles have run, so the worker could have sent
    more."""
    config = _config(backoff=0.01)
    box = SecretBox.from_config(config)
    async with receiver() as flapping, receiver() as healthy:
        held = Held(flapping)
        await queue_for_new_subscription(webhook_db, box, flapping.url, BACKLOG)
        async with running_dispatcher(webhook_db, config, box) as worker:
            with held.released_at_exit():
                await flapping.wait_requests(SLOTS)
                held.answer(503)  # all four fail: it is probed
                delivered = 0
                await wait_until(_holding(held, 1), what="its probe")
                for turn in range(8):
                    success = turn % 2 == 0
                    # The oldest request held is answered: after a success it may have
                    # one more in flight, after a failure one again.
                    held.answer_first(200 if success else 503)
                    if success:
                        await wait_until(_holding(held, 2), what=f"turn {turn}: two requests")
                    for _ in range(2):
                        delivered += 1
                        await queue_for_new_subscription(webhook_db, box, healthy.url, 1)
                        worker.wake.set()
                        await healthy.wait_requests(delivered * (delivered + 1) // 2)
                    assert len(held.open) == (2 if success else 1), f"turn {turn}: {held.open}"
    assert flapping.answered[SLOTS:SLOTS + 8] == [200, 503] * 4
    assert set(healthy.answered) == {200}
    assert await _attempts(webhook_db, flapping.url) == len(flapping.received)


async def test_a_receiver_that_relapses_needs_twice_the_successes(
        webhook_db: Database) -> None:
    """A receiver failing a third of its requests at random often has two successes in
    a row: it left the probe each time, sent its waiting retries at once and failed
    again (a healthy neighbour's p99 1.31x, bench_delivery.py --neighbours flaky). Now
    an endpoint that fails again before as many successes out of the probe as it needed
    to leave it (its parole) needs twice as many the next time; one that serves its
    parole is forgiven, and its next failure needs two again. While probed it has one
    more request in flight per success. Cycles run after every answer (a healthy
    endpoint's events are delivered), so the worker could have sent more."""
    config = _config(backoff=0.01)
    box = SecretBox.from_config(config)
    async with receiver() as flaky, receiver() as healthy:
        held = Held(flaky)
        delivered = 0

        async def cycles_run() -> None:
            nonlocal delivered
            for _ in range(2):
                delivered += 1
                await queue_for_new_subscription(webhook_db, box, healthy.url, 1)
                worker.wake.set()
                await healthy.wait_requests(delivered * (delivered + 1) // 2)

        async def all_slots_busy() -> bool:
            return len(held.open) == SLOTS

        async def probed_until(successes: int) -> None:
            """Answer the oldest request with 200 ``successes`` times: one request in
            flight, one more after each success, until the last; then every slot busy."""
            for n in range(successes):
                expected = min(1 + n, SLOTS)
                await wait_until(_holding(held, expected), what=f"{expected} in flight")
                await cycles_run()
                assert len(held.open) == expected, f"success {n}: {held.open}"
                held.answer_first(200)
            await wait_until(all_slots_busy, what="the recovered endpoint's slots in use")

        await queue_for_new_subscription(webhook_db, box, flaky.url, BACKLOG)
        async with running_dispatcher(webhook_db, config, box) as worker:
            with held.released_at_exit():
                await flaky.wait_requests(SLOTS)
                held.answer(503)  # probed: two successes in a row to leave
                await probed_until(2)
                held.answer(503)  # a relapse, on parole: four the next time
                await probed_until(4)
                held.answer(200)  # four more: parole served, its failures forgotten
                await wait_until(all_slots_busy, what="the forgiven endpoint's slots in use")
                held.answer(503)
                await probed_until(2)
    assert set(healthy.answered) == {200}
    assert await _attempts(webhook_db, flaky.url) == len(flaky.received)


async def test_a_probed_endpoint_failing_again_sends_nothing_past_its_lease(
        webhook_db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """Probed with two slots, an endpoint is claimed two slots' worth; its two sends then
    hang and time out, and it is back to one send at a time with six deliveries claimed
    for two. It keeps them (giving them back at each failure cost a statement ahead of
    the next claim), but a lease counts on at most ``CLAIM_AHEAD - 1`` timeouts of
    waiting (and the lease's margin, here 0.2 s): one at a time, the last of them would
    start a timeout past that. So every request must start within ``CLAIM_AHEAD - 1``
    timeouts and the margin of the claim that brought its delivery (the claims are read
    as the cycle makes them, the requests' arrival as the receiver sees them), and the
    late ones are given back uncounted."""
    timeout, margin = 1.0, 0.2
    # A share of 16 (room for two slots' worth).
    config = _config(max_concurrency=32, timeout=timeout, lease_margin=margin)
    box = SecretBox.from_config(config)
    claims: list[tuple[float, str]] = []  # (when asked for, event id)

    async def recorded_claim(db: Database, outcomes: Sequence[Outcome],
                             claim: ClaimRequest | None) -> CycleResult:
        asked = time.monotonic()  # claim.now, on the receiver's clock
        result = await run_cycle(db, outcomes, claim)
        claims.extend((asked, d.event_id) for d, _ in result.claimed)
        return result

    monkeypatch.setattr(dispatcher_module, "run_cycle", recorded_claim)
    async with receiver() as flaky:
        held = Held(flaky)
        await queue_for_new_subscription(webhook_db, box, flaky.url, BACKLOG)
        async with running_dispatcher(webhook_db, config, box):
            with held.released_at_exit():
                await flaky.wait_requests(SLOTS)
                held.answer(503)  # probed
                await wait_until(_holding(held, 1), what="its probe")
                held.answer_first(200)  # two slots now, claimed for two
                await wait_until(_holding(held, 2), what="two requests")
                # Both hang: timed out, back to one slot. One at a time, each timing
                # out: the sixth after these two starts four timeouts after its claim.
                await flaky.wait_requests(SLOTS + 1 + 2 + 4, within=10 * timeout)
    slack = timeout / 2  # scheduling, on a loaded machine; without the rule: a timeout
    for request in flaky.received:
        event_id = {k.lower(): v for k, v in request.headers.items()}["x-event-id"]
        claimed_at = max(at for at, e in claims if e == event_id and at <= request.at)
        assert request.at - claimed_at <= (CLAIM_AHEAD - 1) * timeout + margin + slack, (
            f"sent {request.at - claimed_at:.2f} s after its claim")
    assert await _attempts(webhook_db, flaky.url) == len(flaky.received)
