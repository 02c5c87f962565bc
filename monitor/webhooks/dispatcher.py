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
import functools
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..config import DeliveryConfig
from ..logs import get_logger
from ..storage.deliveries import DeliveryStore, DueDelivery
from ..storage.delivery_batches import Outcome, claim_and_begin, record_outcomes
from . import metrics
from .batching import GroupCommit
from .secrets import SecretBox
from .sender import AttemptResult, Sender

log = get_logger(__name__)

#: Due rows read ahead per query (oldest first); claims re-check each one.
READ_AHEAD = 512

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
            await self.give_up(d, token, started)
            return AttemptResult(None, 0.0, "attempts used up by interrupted sends")
        secret, previous = self.secrets_for(d.subscription_id, d.secret_sealed,
                                            d.previous_secret_sealed, d.rotated_at, started)
        attempts = await self.store.begin_attempt(d, token, manual, started)
        if attempts is None:
            return AttemptResult(None, 0.0, "claim lost before sending")
        return await self.send_counted(d, token, attempts, started, (secret, previous), manual)

    async def give_up(self, d: DueDelivery, token: str, now: float) -> None:
        """Every attempt was used by sends cut off before their outcome was recorded."""
        gave_up = await self.store.give_up(d, token, now)
        if gave_up:
            metrics.status("max_retries_exceeded")
        log.warning("webhook.attempts_exhausted", delivery_id=d.id,
                    subscription_id=d.subscription_id, event_id=d.event_id,
                    attempts=d.attempts, recorded=gave_up)

    async def claim_batch(self, candidates: list[DueDelivery], token: str
                          ) -> list[tuple[DueDelivery, int, float, tuple[str, str | None]]]:
        """The worker's path: claim the candidates and count one attempt for each in one
        transaction (before any is sent), giving up on those whose attempts are used up.
        Returns what may now be sent: (delivery, attempt number, start, secrets)."""
        started = self.clock()
        ready: list[tuple[DueDelivery, tuple[str, str | None]]] = []
        exhausted: list[DueDelivery] = []
        for d in candidates:
            if d.attempts >= self.config.max_attempts:
                exhausted.append(d)  # claimed only to be given up: no secret needed
                continue
            try:
                ready.append((d, self.secrets_for(d.subscription_id, d.secret_sealed,
                                                  d.previous_secret_sealed, d.rotated_at,
                                                  started)))
            except Exception as exc:
                # Not claimed, not sent: retried on a later pass.
                log.error("webhook.attempt_error", delivery_id=d.id, error=str(exc))
        numbers, used_up = await claim_and_begin(
            self.store.db, [d for d, _ in ready] + exhausted, token, started,
            self.lease_until(started), self.config.max_attempts)
        for d in used_up:
            await self.give_up(d, token, started)
        return [(d, numbers[d.id], started, secrets) for d, secrets in ready
                if d.id in numbers]

    async def send_counted(self, d: DueDelivery, token: str, attempts: int, started: float,
                           secrets: tuple[str, str | None], manual: bool = False
                           ) -> AttemptResult:
        """Send an attempt already counted as number ``attempts`` and record its outcome
        (worker attempts are recorded in batches with others finishing meanwhile)."""
        secret, previous = secrets
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
        if manual:
            recorded = await self.store.record_attempt(
                delivery=d, token=token, manual=manual, started_at=started,
                status_code=result.status_code, latency_ms=result.latency_ms,
                error=result.error, new_status=status, next_attempt_at=next_at, now=now,
                attempt=attempts)
        else:
            recorded = await self._outcomes.submit(Outcome(
                d, token, attempts, started, result.status_code, result.latency_ms,
                result.error, status, next_at, now))
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

    @functools.cached_property
    def _outcomes(self) -> GroupCommit[Outcome, bool]:
        async def flush(batch: Sequence[Outcome]) -> list[bool]:
            recorded = await record_outcomes(self.store.db, batch)
            return [o.delivery.id in recorded for o in batch]

        return GroupCommit(flush)


class Dispatcher:
    """The worker's loop over due deliveries (see the module docstring).

    Due deliveries are read ahead into a buffer (up to :data:`READ_AHEAD` rows, oldest
    first) and claimed from it as slots free up, so a send finishing costs one claim
    transaction shared with the others finishing at the same time, not a fresh due query.
    The claim re-checks every row (still due, unclaimed, same attempts, target and
    secrets), so a buffered row that moved meanwhile is skipped, never sent early or
    twice. The buffer is re-read when :attr:`wake` is set (new deliveries), when it is
    empty, and when it holds nothing a free endpoint could take (then at most every
    ``poll_interval_seconds`` unless it was cut at the read limit).
    """

    def __init__(self, attempts: DeliveryAttempts) -> None:
        self.attempts = attempts
        self.config = attempts.config
        #: Set by whoever creates deliveries: re-read the due rows now.
        self.wake = asyncio.Event()
        self._slot_freed = asyncio.Event()
        self._inflight: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._buffer: list[DueDelivery] = []
        self._buffer_full = False  # the last read hit its limit: more may be due
        self._read_at = -float("inf")

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def _saturated(self) -> list[str]:
        limit = max(self.config.per_endpoint_concurrency, 1)
        return [e for e, n in self._inflight.items() if n >= limit]

    def _pick(self, free: int) -> list[DueDelivery]:
        """Oldest buffered deliveries that fit the overall and per-endpoint bounds."""
        picked: list[DueDelivery] = []
        planned: dict[str, int] = dict(self._inflight)
        for d in self._buffer:
            if len(picked) >= free:
                break
            if planned.get(d.endpoint, 0) >= self.config.per_endpoint_concurrency:
                continue
            planned[d.endpoint] = planned.get(d.endpoint, 0) + 1
            picked.append(d)
        return picked

    async def _read_ahead(self) -> None:
        store, now = self.attempts.store, self.attempts.clock()
        self._buffer = await store.due(now, READ_AHEAD, self._saturated())
        self._buffer_full = len(self._buffer) >= READ_AHEAD
        self._read_at = time.monotonic()

    async def dispatch_due(self, reread: bool = True) -> int:
        """Claim and start what is due and fits the concurrency bounds; returns how many.
        ``reread``: read the due rows afresh first (else only when the buffer has nothing
        a free endpoint could take and may be hiding more)."""
        free = max(self.config.max_concurrency, 1) - len(self._tasks)
        if free <= 0:
            return 0
        if reread:
            await self._read_ahead()
        picked = self._pick(free)
        stale = time.monotonic() - self._read_at >= self.config.poll_interval_seconds
        if not picked and not reread and (self._buffer_full or stale):
            # The buffer holds only saturated endpoints' rows (or is old): retries whose
            # time has come and other endpoints' rows may be waiting behind them.
            await self._read_ahead()
            picked = self._pick(free)
        if not picked:
            return 0
        taken = {d.id for d in picked}
        self._buffer = [d for d in self._buffer if d.id not in taken]
        token = uuid.uuid4().hex
        for d in picked:
            self._inflight[d.endpoint] = self._inflight.get(d.endpoint, 0) + 1
        ready: list[tuple[DueDelivery, int, float, tuple[str, str | None]]] = []
        try:
            ready = await self.attempts.claim_batch(picked, token)
        finally:
            # Slots of deliveries not sent (claimed elsewhere, changed, given up) are free.
            started = {d.id for d, *_ in ready}
            for d in picked:
                if d.id not in started:
                    self._release_slot(d)
        for d, attempt, began, secrets in ready:
            self._tasks.add(asyncio.create_task(self._run_one(d, token, attempt, began,
                                                              secrets)))
        return len(ready)

    def _release_slot(self, d: DueDelivery) -> None:
        self._inflight[d.endpoint] -= 1
        if not self._inflight[d.endpoint]:
            del self._inflight[d.endpoint]

    async def _run_one(self, d: DueDelivery, token: str, attempt: int, started: float,
                       secrets: tuple[str, str | None]) -> None:
        try:
            await self.attempts.send_counted(d, token, attempt, started, secrets)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # A database or secret failure: the claim expires and the delivery is retried.
            log.error("webhook.attempt_error", delivery_id=d.id, error=str(exc))
        finally:
            self._release_slot(d)
            task = asyncio.current_task()
            if task is not None:
                self._tasks.discard(task)
            self._slot_freed.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop``: dispatch, then sleep until woken or the poll interval passes.
        On stop, in-flight sends finish (each is bounded by the HTTP timeout)."""
        stop_wait = asyncio.create_task(stop.wait())
        try:
            while not stop.is_set():
                reread = self.wake.is_set() or not self._buffer
                self.wake.clear()
                self._slot_freed.clear()
                try:
                    await self.dispatch_due(reread)
                except Exception as exc:
                    log.error("webhook.dispatch_error", error=str(exc))
                wake_wait = asyncio.create_task(self.wake.wait())
                freed_wait = asyncio.create_task(self._slot_freed.wait())
                await asyncio.wait({stop_wait, wake_wait, freed_wait},
                                   timeout=self.config.poll_interval_seconds,
                                   return_when=asyncio.FIRST_COMPLETED)
                wake_wait.cancel()
                freed_wait.cancel()
        finally:
            stop_wait.cancel()
            if self._tasks:
                _, pending = await asyncio.wait(
                    set(self._tasks), timeout=self.config.timeout_seconds + 5)
                for task in pending:
                    task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.gather(*pending, return_exceptions=True)
