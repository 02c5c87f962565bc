"""Drives deliveries from the database: claim what is due, send, record, schedule retries.

Isolation: at most ``max_concurrency`` sends in flight overall and
``per_endpoint_concurrency`` per endpoint (scheme://host:port). A saturated endpoint's
deliveries are left unclaimed — they are excluded from the due query — so a hanging
receiver holds at most its own few slots and never the queue of healthy ones.

Retries: exponential backoff with jitter, ``backoff_base * 2**(n-1)`` capped at
``backoff_max``, scaled by a random factor in ``[1 - jitter, 1 + jitter]``; after
``max_attempts`` failed attempts the delivery is ``max_retries_exceeded``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from ..config import DeliveryConfig
from ..logs import get_logger
from ..storage.deliveries import DeliveryStore, DueDelivery
from . import metrics
from .secrets import SecretBox
from .sender import AttemptResult, Sender

log = get_logger(__name__)

Clock = Callable[[], float]


def backoff_delay(attempt: int, config: DeliveryConfig, rand: Callable[[], float]) -> float:
    """Delay before attempt ``attempt + 1`` after ``attempt`` failures (``attempt >= 1``)."""
    base = min(config.backoff_max_seconds, config.backoff_base_seconds * 2.0 ** (attempt - 1))
    return max(0.0, base * (1.0 + config.backoff_jitter * (2.0 * rand() - 1.0)))


@dataclass
class DeliveryAttempts:
    """One attempt of one delivery: shared by the worker and the API's manual retry."""

    store: DeliveryStore
    sender: Sender
    box: SecretBox
    config: DeliveryConfig
    clock: Clock = time.time
    rand: Callable[[], float] = field(default=random.random)

    def lease_until(self, now: float) -> float:
        return now + self.config.timeout_seconds + self.config.lease_margin_seconds

    def secrets_for(self, subscription_id: str, sealed: str, previous_sealed: str | None,
                    rotated_at: float | None, now: float) -> tuple[str, str | None]:
        """The signing secret, plus the previous one while the rotation window is open."""
        secret = self.box.open(sealed, subscription_id)
        previous = None
        if (previous_sealed and rotated_at is not None
                and now - rotated_at < self.config.previous_secret_seconds):
            previous = self.box.open(previous_sealed, subscription_id)
        return secret, previous

    async def attempt(self, d: DueDelivery, token: str, manual: bool = False) -> AttemptResult:
        """Send ``d`` (already claimed with ``token``) once and record the outcome.

        The attempt is counted before the request goes out, so however often the worker
        dies mid-send, a delivery gets at most ``max_attempts`` automatic sends."""
        started = self.clock()
        if not manual and d.attempts >= self.config.max_attempts:
            # Every attempt was used by sends cut off before their outcome was recorded.
            gave_up = await self.store.give_up(d, token, started)
            if gave_up:
                metrics.status("max_retries_exceeded")
            log.warning("webhook.attempts_exhausted", delivery_id=d.id,
                        subscription_id=d.subscription_id, event_id=d.event_id,
                        attempts=d.attempts, recorded=gave_up)
            return AttemptResult(None, 0.0, "attempts used up by interrupted sends")
        secret, previous = self.secrets_for(d.subscription_id, d.secret_sealed,
                                            d.previous_secret_sealed, d.rotated_at, started)
        attempts = await self.store.begin_attempt(d, token, manual, started)
        if attempts is None:
            return AttemptResult(None, 0.0, "claim lost before sending")
        with metrics.in_flight():
            result = await self.sender.send(
                d.webhook_url, d.payload, event_type=d.event_type, event_id=d.event_id,
                secret=secret, previous_secret=previous, delivered_at=started)
        metrics.attempt(result.status_code, result.error, result.latency_ms / 1000.0)
        now = self.clock()
        next_at: float | None = None
        if result.ok:
            status = "success"
        elif manual and d.status == "max_retries_exceeded":
            # A failed manual re-send of an exhausted delivery schedules nothing new.
            status = d.status
        elif attempts >= self.config.max_attempts:
            status = "max_retries_exceeded"
        else:
            status = "failed"
            next_at = now + backoff_delay(attempts, self.config, self.rand)
        recorded = await self.store.record_attempt(
            delivery=d, token=token, manual=manual, started_at=started,
            status_code=result.status_code, latency_ms=result.latency_ms, error=result.error,
            new_status=status, next_attempt_at=next_at, now=now, attempt=attempts)
        if recorded and (status == "failed" or status != d.status):
            metrics.status(status)
            if status == "success":
                metrics.delivered(now - d.created_at)
        # A failed attempt is a warning: the operator's signal that a receiver is in trouble.
        (log.info if result.ok else log.warning)(
            "webhook.attempt", delivery_id=d.id, subscription_id=d.subscription_id,
            event_id=d.event_id, attempt=attempts, manual=manual, outcome=status,
            status_code=result.status_code, latency_ms=round(result.latency_ms, 1),
            error=result.error, recorded=recorded)
        return result


class Dispatcher:
    """The worker's loop over due deliveries (see the module docstring)."""

    def __init__(self, attempts: DeliveryAttempts) -> None:
        self.attempts = attempts
        self.config = attempts.config
        self.wake = asyncio.Event()
        self._inflight: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def _saturated(self) -> list[str]:
        limit = max(self.config.per_endpoint_concurrency, 1)
        return [e for e, n in self._inflight.items() if n >= limit]

    async def dispatch_due(self) -> int:
        """Claim and start what is due and fits the concurrency bounds; returns how many."""
        free = max(self.config.max_concurrency, 1) - len(self._tasks)
        if free <= 0:
            return 0
        store, clock = self.attempts.store, self.attempts.clock
        rows = await store.due(clock(), min(free * 4, 1000), self._saturated())
        # Pick what fits the bounds first, then claim them all in one statement.
        picked: list[DueDelivery] = []
        planned: dict[str, int] = dict(self._inflight)
        for d in rows:
            if len(picked) >= free:
                break
            if planned.get(d.endpoint, 0) >= self.config.per_endpoint_concurrency:
                continue
            planned[d.endpoint] = planned.get(d.endpoint, 0) + 1
            picked.append(d)
        if not picked:
            return 0
        token = uuid.uuid4().hex
        now = clock()
        held = await store.claim_many([d.id for d in picked], token, now,
                                      self.attempts.lease_until(now))
        for d in picked:
            if d.id not in held:
                continue  # another worker got there first
            self._inflight[d.endpoint] = self._inflight.get(d.endpoint, 0) + 1
            self._tasks.add(asyncio.create_task(self._run_one(d, token)))
        return len(held)

    async def _run_one(self, d: DueDelivery, token: str) -> None:
        try:
            await self.attempts.attempt(d, token)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # A database or secret failure: the claim expires and the delivery is retried.
            log.error("webhook.attempt_error", delivery_id=d.id, error=str(exc))
        finally:
            self._inflight[d.endpoint] -= 1
            if not self._inflight[d.endpoint]:
                del self._inflight[d.endpoint]
            task = asyncio.current_task()
            if task is not None:
                self._tasks.discard(task)
            self.wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop``: dispatch, then sleep until woken or the poll interval passes.
        On stop, in-flight sends finish (each is bounded by the HTTP timeout)."""
        stop_wait = asyncio.create_task(stop.wait())
        try:
            while not stop.is_set():
                self.wake.clear()
                try:
                    await self.dispatch_due()
                except Exception as exc:
                    log.error("webhook.dispatch_error", error=str(exc))
                wake_wait = asyncio.create_task(self.wake.wait())
                await asyncio.wait({stop_wait, wake_wait},
                                   timeout=self.config.poll_interval_seconds,
                                   return_when=asyncio.FIRST_COMPLETED)
                wake_wait.cancel()
        finally:
            stop_wait.cancel()
            if self._tasks:
                _, pending = await asyncio.wait(
                    set(self._tasks), timeout=self.config.timeout_seconds + 5)
                for task in pending:
                    task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.gather(*pending, return_exceptions=True)
