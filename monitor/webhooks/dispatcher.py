"""Drives deliveries from the database: claim what is due, send, record, schedule retries.

The worker is two loops that never wait on each other:

* **senders**: one long-running coroutine per slot (at most ``max_concurrency``), not a
  task per POST. A claimed delivery waits in its endpoint's *ready* queue; when a send
  finishes, its sender takes the next ready delivery of that endpoint (or of any endpoint
  with a free slot) at once, with no database work in between; with none ready it waits
  idle until the next claim hands it one. The finished send leaves its outcome in a list.
* **bookkeeping** (:meth:`Dispatcher.run`): a cycle writes every outcome finished since
  the last one and claims the next due deliveries (counting one attempt for each, before
  any is sent) in ONE transaction (:func:`~monitor.storage.delivery_batches.run_cycle`).
  Cycles run back to back while there is work, so the batch size follows the load.

What a cycle claims, and whether it reads at all, is :class:`.claimplan.ClaimPlan`'s
choice (it remembers what past reads found). Claims run ahead of the sends by
:data:`~.claimplan.CLAIM_AHEAD` times the concurrency bounds, so a
freed slot always finds a claimed delivery waiting. A delivery waits in a ready queue
behind at most ``CLAIM_AHEAD - 1`` sends per slot of its endpoint (each at most
``timeout_seconds``), so its lease is ``CLAIM_AHEAD * timeout_seconds +
lease_margin_seconds``. On a clean stop the
claimed-but-unsent deliveries are given back with their attempt uncounted; after a crash
they count as interrupted attempts, like the sends that were in flight (never more than
``max_attempts`` sends, whatever crashes).

Isolation: at most ``max_concurrency`` sends in flight overall and
``per_endpoint_concurrency`` per endpoint (scheme://host:port), and claims are bounded per
endpoint too: a hanging receiver holds its own few slots and ready deliveries, never the
queue of healthy ones (endpoints without room are left out of the due query).

An endpoint whose send failed is probed (:mod:`.probe`: until two of its sends in a row
succeed, more if it keeps relapsing): its sends go one at a time, one more at once per
success in a row, and it is claimed one slot's worth (``CLAIM_AHEAD``) per send. Its
deliveries claimed but not sent when it enters the probe are given back uncounted by the
next cycle (they were claimed outside the failing endpoints' share, for all its slots),
and so are those a claim asked for before then brings after. Failing again while probed,
it keeps what it holds, and what could no longer be sent within its lease one at a time
is given back when its turn comes. A dead receiver thus holds
one slot, not ``per_endpoint_concurrency``, from its first failure on, and the ends of
its sends (a timeout, the failure's cycle, a new connection), which the healthy
endpoints' sends wait behind on the event loop, come that much less often. All failing
endpoints together hold at most half the worker's slots (:func:`.probe.failing_share`),
in turns, so no number of dead receivers leaves a healthy endpoint without slots or
claims.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import deque
from typing import Any, NamedTuple

from ..logs import get_logger
from ..storage.deliveries import DueDelivery
from ..storage.delivery_batches import (
    CycleResult,
    Outcome,
    release_unsent,
    run_cycle,
)
from ..storage.due_read import ClaimRequest
from . import metrics
from .attempts import DeliveryAttempts, backoff_delay
from .claimplan import CLAIM_AHEAD, ClaimPlan
from .handout import handout
from .probe import Probes, failing_share
from .wakeup import Flag, Wakeup
from .walcheckpoint import WalCheckpoints

__all__ = ["CLAIM_AHEAD", "DeliveryAttempts", "Dispatcher", "backoff_delay", "failing_share"]

log = get_logger(__name__)

#: Longest a finished send's outcome waits for its cycle while every sender still has a
#: claimed delivery to send next (see :meth:`Dispatcher._finished`).
OUTCOME_WAIT = 0.005
#: Event-loop steps a set ``_work`` flag lets pass before it wakes the loop (which takes
#: one more step): the three ``asyncio.wait`` took (:mod:`.wakeup` says why).
OUTCOME_STEPS = 2


class _Ready(NamedTuple):
    """A claimed delivery (one attempt counted) waiting for a free slot of its endpoint."""

    delivery: DueDelivery
    token: str
    attempt: int
    started: float
    secrets: tuple[str, str | None]


class Dispatcher:
    """The worker's loop over due deliveries (see the module docstring)."""

    def __init__(self, attempts: DeliveryAttempts) -> None:
        self.attempts = attempts
        self.config = attempts.config
        self._wakeup = Wakeup()  # what the loop awaits between cycles (see run)
        #: Set by whoever creates deliveries: look for due rows now.
        self.wake: asyncio.Event = Flag(self._wakeup.wake)
        #: An outcome waits to be written, a slot was freed: the loop runs its cycle
        #: once the answers that came with it are read (OUTCOME_STEPS, .wakeup).
        self._work: asyncio.Event = Flag(self._wakeup.wake, OUTCOME_STEPS)
        self._ready: dict[str, deque[_Ready]] = {}
        self._inflight: dict[str, int] = {}
        self._busy = 0  # sends in flight
        self._none_busy = asyncio.Event()
        self._none_busy.set()
        self._senders: set[asyncio.Task[None]] = set()  # one per slot, kept between sends
        self._idle: deque[asyncio.Future[_Ready | None]] = deque()  # senders waiting
        self._outcomes: list[Outcome] = []
        #: The endpoints probed (a send failed, and not enough have succeeded in a row
        #: since): their deliveries start after the others' (:mod:`.handout`), so their
        #: retries never hold a healthy one's send, and go one at a time.
        self._probes = Probes(self.config.per_endpoint_concurrency)
        self._plan = ClaimPlan(self.config, self._probes)
        #: Claimed, never sent, to give back uncounted with the next cycle: a failing
        #: endpoint's deliveries claimed for all its slots.
        self._unsent: list[_Ready] = []
        self._stopping = False
        self._timer: asyncio.TimerHandle | None = None

    @property
    def in_flight(self) -> int:
        return self._busy

    @property
    def waiting(self) -> bool:
        """Whether the loop is between cycles, waiting for work (:mod:`.wakeup`)."""
        return self._wakeup.waiting

    @property
    def ready(self) -> int:
        """Claimed deliveries waiting for a slot."""
        return sum(len(q) for q in self._ready.values())

    def lease_until(self, now: float) -> float:
        return (now + CLAIM_AHEAD * self.config.timeout_seconds
                + self.config.lease_margin_seconds)

    # -- claiming --------------------------------------------------------------------
    def _claim_request(self, look: bool) -> ClaimRequest | None:
        """What to claim now (:meth:`.claimplan.ClaimPlan.request`), or None."""
        plan = self._plan.request(look, self._inflight, self._ready, time.monotonic())
        if plan is None:
            return None
        limit, room, walk = plan
        now = self.attempts.clock()
        return ClaimRequest(limit, room, self._plan.per_endpoint, uuid.uuid4().hex, now,
                            self.lease_until(now), self.config.max_attempts, walk)

    async def cycle(self, look: bool = True) -> bool:
        """Write the finished outcomes and claim what is due, in one transaction; start
        the sends it allows. ``look``: read the due rows even if nothing suggests new
        ones. Returns whether there was anything to do."""
        if self._unsent:
            await self._give_back()  # first: the claim below takes them again
            look = True
        outcomes, self._outcomes = self._outcomes, []
        claim = None if self._stopping else self._claim_request(look)
        number = self._plan.claims  # this claim's, if there is one
        if not outcomes and claim is None:
            metrics.in_flight(self._busy, len(self._probes.failing))
            return False
        try:
            result = await run_cycle(self.attempts.store.db, outcomes, claim)
        except BaseException:
            self._outcomes[:0] = outcomes  # written with the next cycle
            raise
        if claim is not None:
            self._plan.read(claim, result, time.monotonic())
        if outcomes:
            self.attempts.report_cycle(outcomes, result.recorded)
        await self._accept(result, claim, number)
        metrics.in_flight(self._busy, len(self._probes.failing))
        if claim is not None:
            self._plan.filled(claim, result, self._plan.room(self._inflight, self._ready))
        return True

    async def _accept(self, result: CycleResult, claim: ClaimRequest | None,
                      number: int) -> None:
        for d in result.exhausted:
            metrics.status("max_retries_exceeded")
            log.warning("webhook.attempts_exhausted", delivery_id=d.id,
                        subscription_id=d.subscription_id, event_id=d.event_id,
                        attempts=d.attempts, recorded=True)
        if claim is None or not result.claimed:
            return
        unusable: list[tuple[DueDelivery, str, int]] = []
        failing = self._probes.failing
        for d, attempt in result.claimed:
            try:
                secrets = self.attempts.secrets_for(d.subscription_id, d.secret_sealed,
                                                    d.previous_secret_sealed, d.rotated_at,
                                                    claim.now)
            except Exception as exc:
                # Not sent: given back uncounted and retried on a later pass.
                log.error("webhook.attempt_error", delivery_id=d.id, error=str(exc))
                unusable.append((d, claim.token, attempt))
                continue
            ready = _Ready(d, claim.token, attempt, claim.now, secrets)
            before = failing.get(d.endpoint)
            if before is not None and number <= before:
                self._unsent.append(ready)  # claimed for all its slots (see _failed)
                continue
            self._ready.setdefault(d.endpoint, deque()).append(ready)
        self._start_sends()
        if self._unsent:
            self._work.set()  # given back by the next cycle
        if unusable:
            await release_unsent(self.attempts.store.db, unusable)

    async def _give_back(self) -> None:
        """Give back, uncounted, the deliveries set aside by :meth:`_failed`."""
        unsent, self._unsent = self._unsent, []
        try:
            await release_unsent(self.attempts.store.db,
                                 [(r.delivery, r.token, r.attempt) for r in unsent])
        except BaseException:
            self._unsent[:0] = unsent  # given back with the next cycle
            raise

    # -- sending -----------------------------------------------------------------------
    def _take(self, first: str | None) -> _Ready | None:
        """The next ready delivery an endpoint has a free slot for, counted in flight;
        None when there is none. ``first``'s (a sender's own endpoint: its connection
        is warm) unless it is probed; else the one :func:`.handout.handout`
        would start next."""
        limit = max(self.config.per_endpoint_concurrency, 1)
        if first is not None and first not in self._probes.failing:
            queue = self._ready.get(first)
            if queue and self._inflight.get(first, 0) < limit:
                return self._pop(first, queue)
        while self._ready:
            order = handout({e: len(q) for e, q in self._ready.items()}, self._inflight,
                            limit, 1, self._probes.slots)
            if not order:
                return None
            ready = self._pop_handed(order[0])
            if ready is not None:
                return ready  # else that endpoint's were all late: look again
        return None

    def _pop_handed(self, endpoint: str) -> _Ready | None:
        """:meth:`_pop` for an endpoint the handout chose; None when it is probed and has
        only late deliveries left (set aside by :meth:`_set_aside_late`)."""
        queue = self._ready[endpoint]
        if endpoint in self._probes.slots:
            self._set_aside_late(queue)
            if not queue:
                del self._ready[endpoint]
                return None
        return self._pop(endpoint, queue)

    def _pop(self, endpoint: str, queue: deque[_Ready]) -> _Ready:
        ready = queue.popleft()
        if not queue:
            del self._ready[endpoint]
        self._inflight[endpoint] = self._inflight.get(endpoint, 0) + 1
        self._busy += 1
        self._none_busy.clear()
        return ready

    def _start_sends(self) -> None:
        """Hand ready deliveries to idle senders, or start new ones (at most
        ``max_concurrency`` senders exist): endpoints being probed last, the
        endpoint with the fewest sends in flight first (:mod:`.handout`)."""
        if self._stopping:
            return
        free = max(self.config.max_concurrency, 1) - self._busy
        if free <= 0 or not self._ready:
            return
        order = handout({e: len(q) for e, q in self._ready.items()}, self._inflight,
                        max(self.config.per_endpoint_concurrency, 1), free,
                        self._probes.slots)
        for endpoint in order:
            # Absent or None: a probed endpoint's deliveries were all late (set aside).
            ready = self._pop_handed(endpoint) if endpoint in self._ready else None
            if ready is None:
                continue
            while self._idle and self._idle[0].done():
                self._idle.popleft()  # cancelled by a stop
            if self._idle:
                self._idle.popleft().set_result(ready)
            else:
                task = asyncio.create_task(self._sender(ready))
                self._senders.add(task)
                task.add_done_callback(self._senders.discard)

    async def _sender(self, ready: _Ready | None) -> None:
        """One slot: sends, then takes the next ready delivery itself (its endpoint's
        first) without another task or a trip through the loop; waits idle when none."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()  # once per slot, not per send (Sender.send's task)
        while ready is not None:
            endpoint = ready.delivery.endpoint
            await self._send(ready, task)
            ready = None if self._stopping else self._take(endpoint)
            if ready is None and not self._stopping:
                self._work.set()  # a slot without work: claim now
                idle: asyncio.Future[_Ready | None] = loop.create_future()
                self._idle.append(idle)
                ready = await idle

    async def _send(self, r: _Ready, task: asyncio.Task[Any] | None) -> None:
        d = r.delivery
        attempts = self.attempts
        try:
            # DeliveryAttempts.send(count=False) without its coroutine frame: the attempt
            # is counted with the cycle's report, the in-flight gauge set per cycle.
            secret, previous = r.secrets
            result = await attempts.sender.send(
                d.webhook_url, d.payload, event_type=d.event_type, event_id=d.event_id,
                secret=secret, previous_secret=previous, delivered_at=attempts.clock(),
                task=task)
            now = attempts.clock()
            if result.error is None:
                self._probes.succeeded(d.endpoint)
            else:
                self._failed(d.endpoint)
            status, next_at = attempts.next_state(d, r.attempt, result, False, now)
            self._outcomes.append(Outcome(d, r.token, r.attempt, r.started, result.status_code,
                                          result.latency_ms, result.error, status, next_at,
                                          now))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Not recorded: the claim expires and the delivery is retried.
            log.error("webhook.attempt_error", delivery_id=d.id, error=str(exc))
        finally:
            self._inflight[d.endpoint] -= 1
            if not self._inflight[d.endpoint]:
                del self._inflight[d.endpoint]
            self._busy -= 1
            if not self._busy:
                self._none_busy.set()
            self._plan.freed.add(d.endpoint)
            self._finished()

    def _failed(self, endpoint: str) -> None:
        """An endpoint's send failed. Probed from now on (see :mod:`.probe`), its
        deliveries claimed and not sent were claimed outside the failing endpoints' share
        and for all its slots: they are given back with the next cycle, and claimed again
        inside the share, one slot's worth per send it may have in flight. Probed already,
        it is back to one send at a time and keeps what it holds (claimed inside the
        share): giving that back at each failure cost a statement ahead of the next claim
        (docs/performance.md, forty-first pass); what could no longer be sent within its
        lease one at a time is set aside when its turn comes (:meth:`_set_aside_late`)."""
        if self._probes.failed(endpoint, self._plan.claims):
            queue = self._ready.pop(endpoint, None)
            if queue:
                self._unsent.extend(queue)

    def _set_aside_late(self, queue: deque[_Ready]) -> None:
        """Move a probed endpoint's ready deliveries that could not finish within their
        leases if sent now (claimed for more slots than it has now) to those given back
        with the next cycle: claimed more than CLAIM_AHEAD - 1 timeouts ago, and half
        the lease's margin, the other half kept for the outcome's cycle. The queue is in
        claim order, so only its head can be late."""
        config = self.config
        latest = self.attempts.clock() - ((CLAIM_AHEAD - 1) * config.timeout_seconds
                                          + config.lease_margin_seconds / 2)
        if queue[0].started < latest:
            while queue and queue[0].started < latest:
                self._unsent.append(queue.popleft())
            self._work.set()  # a cycle gives them back

    def _finished(self) -> None:
        """A send finished: bring a cycle now, or within :data:`OUTCOME_WAIT`.

        A busy worker's sends finish one by one, and a cycle per finished send wrote ~20
        outcomes a cycle in a drain: the cycle's fixed cost (its due read, its commit's
        pages) paid that often. While every sender has a claimed delivery to send next,
        nothing waits on the cycle but the outcomes' record, so it waits until a round of
        sends has finished (``max_concurrency`` outcomes) or OUTCOME_WAIT has passed;
        a sender left without a delivery brings it at once (``_sender``), so claims keep
        up and a quiet worker records each outcome as it comes."""
        if len(self._outcomes) >= self.config.max_concurrency or self._stopping:
            self._work.set()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(OUTCOME_WAIT, self._work.set)

    def _cancel_timer(self) -> None:
        """A cycle is starting (or the worker stopping): the outcome wait is over."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # -- the loop ----------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop``: cycle while there is work, else sleep until woken, a send
        finishes or the poll interval passes. On stop, in-flight sends finish (each is
        bounded by the HTTP timeout), their outcomes are written, and claimed deliveries
        not sent are given back."""
        # SQLite: the log's checkpoints on a thread, not inside a cycle's COMMIT.
        checkpoints = await WalCheckpoints.start(self.attempts.store.db)
        stop_wait = asyncio.create_task(stop.wait())
        stop_wait.add_done_callback(lambda _: self._wakeup.wake())
        try:
            while not stop.is_set():
                look = self.wake.is_set()
                self.wake.clear()
                self._work.clear()
                self._wakeup.forget()  # what woke it is read above
                self._cancel_timer()
                busy = False
                try:
                    busy = await self.cycle(look)
                except Exception as exc:
                    log.error("webhook.dispatch_error", error=str(exc))
                if busy and checkpoints is not None:
                    checkpoints.after_cycle()
                self.attempts.log_summaries(self.attempts.clock())
                if busy and self._plan.more_due:
                    continue  # the read was cut at its limit: claim the rest now
                # One future, resolved by the flags above (or at once if one woke it
                # during the cycle), the stop or the poll interval (.wakeup).
                await self._wakeup.wait(self.config.poll_interval_seconds)
        finally:
            stop_wait.cancel()
            await self._drain()
            self.attempts.log_summaries(self.attempts.clock(), closing=True)
            if checkpoints is not None:
                await checkpoints.stop()

    async def _drain(self) -> None:
        self._stopping = True
        self._cancel_timer()
        for idle in self._idle:
            if not idle.done():
                idle.set_result(None)
        self._idle.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._none_busy.wait(), self.config.timeout_seconds + 5)
        pending = set(self._senders)
        for task in pending:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*pending, return_exceptions=True)
        unsent = [(r.delivery, r.token, r.attempt)
                  for queue in self._ready.values() for r in queue]
        self._ready.clear()
        try:
            await self.cycle(look=False)
            await release_unsent(self.attempts.store.db, unsent)
        except Exception as exc:
            # Their claims expire and they are retried (as interrupted attempts).
            log.error("webhook.stop_bookkeeping_failed", error=str(exc),
                      outcomes=len(self._outcomes), unsent=len(unsent) + len(self._unsent))
        metrics.in_flight(self._busy, len(self._probes.failing))

