"""One attempt of one delivery: what it costs, what follows from its answer.

Shared by the worker's :class:`~monitor.webhooks.dispatcher.Dispatcher` (which records
outcomes in batches) and the API's manual retry and test sends (one at a time).

Retries: exponential backoff with jitter, ``backoff_base * 2**(n-1)`` capped at
``backoff_max``, scaled by a random factor in ``[1 - jitter, 1 + jitter]``; after
``max_attempts`` failed attempts the delivery is ``max_retries_exceeded``.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field

from ..config import DeliveryConfig
from ..logs import get_logger
from ..storage.deliveries import DeliveryStore, DueDelivery
from ..storage.delivery_batches import Outcome
from ..timefmt import format_ts
from . import metrics
from .attemptlog import DeliveredTally, FailedAttemptLog, FailureSummary
from .secrets import SecretBox
from .sender import AttemptResult, Sender

log = get_logger(__name__)
#: The stdlib logger behind ``log``: asking it whether INFO is on costs far less than a
#: structlog call that is then filtered out (~10 µs, once per successful send).
_level = logging.getLogger(__name__)

Clock = Callable[[], float]

#: Opened signing secrets kept per (subscription, sealed value): opening one is an
#: AES-GCM decryption per send otherwise. A rotation changes the sealed value, so a
#: stale entry is never used; the cache is dropped whole when it grows past this.
SECRET_CACHE_SIZE = 4096


def backoff_delay(attempt: int, config: DeliveryConfig, rand: Callable[[], float]) -> float:
    """Delay before attempt ``attempt + 1`` after ``attempt`` failures (``attempt >= 1``)."""
    base = min(config.backoff_max_seconds, config.backoff_base_seconds * 2.0 ** (attempt - 1))
    return max(0.0, base * (1.0 + config.backoff_jitter * (2.0 * rand() - 1.0)))


def _status_moved(d: DueDelivery, status: str, recorded: bool) -> bool:
    """Whether an outcome counts in the status counter (the caller counts it, alone or
    per cycle): only a written one, every failure, any other status when it changed."""
    return recorded and (status == "failed" or status != d.status)


@dataclass
class DeliveryAttempts:
    """Sending one claimed delivery and recording its outcome."""

    store: DeliveryStore
    sender: Sender
    box: SecretBox
    config: DeliveryConfig
    clock: Clock = time.time
    rand: Callable[[], float] = field(default=random.random)
    _opened: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)
    _failures: FailedAttemptLog = field(init=False, repr=False)
    _delivered: DeliveredTally = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._failures = FailedAttemptLog(self.config.attempt_log_seconds)
        self._delivered = DeliveredTally(self.config.attempt_log_seconds)

    def lease_until(self, now: float) -> float:
        return now + self.config.timeout_seconds + self.config.lease_margin_seconds

    def _open(self, sealed: str, subscription_id: str) -> str:
        key = (subscription_id, sealed)
        secret = self._opened.get(key)
        if secret is None:
            secret = self.box.open(sealed, subscription_id)
            if len(self._opened) >= SECRET_CACHE_SIZE:
                self._opened.clear()
            self._opened[key] = secret
        return secret

    def secrets_for(self, subscription_id: str, sealed: str, previous_sealed: str | None,
                    rotated_at: float | None, now: float) -> tuple[str, str | None]:
        """The signing secret, plus the previous one while the rotation window is open."""
        secret = self._open(sealed, subscription_id)
        previous = None
        if (previous_sealed and rotated_at is not None
                and now - rotated_at < self.config.previous_secret_seconds):
            previous = self._open(previous_sealed, subscription_id)
        return secret, previous

    def next_state(self, d: DueDelivery, attempt: int, result: AttemptResult,
                   manual: bool, now: float) -> tuple[str, float | None]:
        """(new status, next attempt time) after attempt number ``attempt`` of ``d``."""
        if result.ok:
            return "success", None
        if manual and d.status == "max_retries_exceeded":
            # A failed manual re-send of an exhausted delivery schedules nothing new.
            return d.status, None
        if attempt >= self.config.max_attempts:
            return "max_retries_exceeded", None
        return "failed", now + backoff_delay(attempt, self.config, self.rand)

    def report(self, d: DueDelivery, attempt: int, manual: bool, result: AttemptResult,
               status: str, recorded: bool, now: float) -> None:
        """Metrics and the log line of one attempt whose outcome was written (or not)."""
        if _status_moved(d, status, recorded):
            if status == "success":
                metrics.delivered(now - d.created_at)
            metrics.status(status)
        self.log_attempt(d, attempt, manual, result, status, recorded, now)

    def report_cycle(self, outcomes: Sequence[Outcome], recorded: Container[str]) -> None:
        """:meth:`report` for a cycle's outcomes (sent with ``count=False``): counters
        incremented once per status and cycle, the histograms per attempt as before."""
        metrics.attempts_finished((o.status_code, o.error, o.latency_ms / 1000.0)
                                  for o in outcomes)
        statuses: dict[str, int] = {}
        delivered: list[float] = []
        info = _level.isEnabledFor(logging.INFO)
        for o in outcomes:
            d, status = o.delivery, o.new_status
            written = d.id in recorded
            if _status_moved(d, status, written):
                if status == "success":
                    delivered.append(o.now - d.created_at)
                statuses[status] = statuses.get(status, 0) + 1
            if info or status != "success":
                self.log_attempt(d, o.attempt, False,
                                 AttemptResult(o.status_code, o.latency_ms, o.error),
                                 status, written, o.now)
        metrics.delivered_many(delivered)
        for status, n in statuses.items():
            metrics.status(status, n)

    def log_attempt(self, d: DueDelivery, attempt: int, manual: bool, result: AttemptResult,
                    status: str, recorded: bool, now: float) -> None:
        """A manual attempt's line: info, or warning when it failed. An automatic one's,
        when ``attempt_log_seconds`` is set (see :mod:`~monitor.webhooks.attemptlog`): a
        success at debug, counted for the interval's summary; a failure at warning when
        it is its endpoint's first in the interval, else at debug, counted."""
        emit = log.warning
        summing = self.config.attempt_log_seconds > 0 and not manual
        if result.ok:
            if summing:
                self._delivered.delivered(d.endpoint, now, result.latency_ms)
                if not _level.isEnabledFor(logging.DEBUG):
                    return
                emit = log.debug
            elif not _level.isEnabledFor(logging.INFO):
                return
            else:
                emit = log.info
        elif summing:
            first, ended = self._failures.failed(d.endpoint, now, d.subscription_id, d.id,
                                                 result.status_code, result.error,
                                                 status == "max_retries_exceeded")
            if ended is not None:
                _log_failures(ended, now)
            if not first:
                if not _level.isEnabledFor(logging.DEBUG):
                    return
                emit = log.debug
        emit(
            "webhook.attempt", delivery_id=d.id, subscription_id=d.subscription_id,
            event_id=d.event_id, attempt=attempt, manual=manual, outcome=status,
            status_code=result.status_code, latency_ms=round(result.latency_ms, 1),
            error=result.error, recorded=recorded)

    def log_summaries(self, now: float, closing: bool = False) -> None:
        """The summary lines of the intervals that have passed (all of them when
        ``closing``: the worker is stopping)."""
        failures, tally = self._failures, self._delivered
        for summary in failures.close() if closing else failures.due(now):
            _log_failures(summary, now)
        delivered = tally.close() if closing else tally.due(now)
        if delivered is not None:
            log.info("webhook.delivered", delivered=delivered.delivered,
                     endpoints=len(delivered.endpoints), since=format_ts(delivered.since),
                     seconds=round(now - delivered.since, 1),
                     slowest_ms=round(delivered.slowest_ms, 1))

    async def attempt(self, d: DueDelivery, token: str, manual: bool = False) -> AttemptResult:
        """Send ``d`` (already claimed with ``token``) once and record the outcome.

        The attempt is counted before the request goes out, so however often the worker
        dies mid-send, a delivery gets at most ``max_attempts`` automatic sends."""
        started = self.clock()
        if not manual and d.attempts >= self.config.max_attempts:
            await self.give_up(d, token, started)
            return AttemptResult(None, 0.0, "attempts used up by interrupted sends")
        secrets = self.secrets_for(d.subscription_id, d.secret_sealed,
                                   d.previous_secret_sealed, d.rotated_at, started)
        attempts = await self.store.begin_attempt(d, token, manual, started)
        if attempts is None:
            return AttemptResult(None, 0.0, "claim lost before sending")
        return await self.send_counted(d, token, attempts, started, secrets, manual)

    async def give_up(self, d: DueDelivery, token: str, now: float) -> None:
        """Every attempt was used by sends cut off before their outcome was recorded."""
        gave_up = await self.store.give_up(d, token, now)
        if gave_up:
            metrics.status("max_retries_exceeded")
        log.warning("webhook.attempts_exhausted", delivery_id=d.id,
                    subscription_id=d.subscription_id, event_id=d.event_id,
                    attempts=d.attempts, recorded=gave_up)

    async def send(self, d: DueDelivery, secrets: tuple[str, str | None],
                   count: bool = True) -> AttemptResult:
        """The POST itself, counted in the attempt metrics and the in-flight gauge
        (``count=False``: the caller counts it, as the worker's dispatcher does per cycle
        with :meth:`report_cycle` and :func:`~monitor.webhooks.metrics.in_flight`)."""
        secret, previous = secrets
        if not count:
            return await self.sender.send(
                d.webhook_url, d.payload, event_type=d.event_type, event_id=d.event_id,
                secret=secret, previous_secret=previous, delivered_at=self.clock())
        metrics.send_started()
        try:
            result = await self.sender.send(
                d.webhook_url, d.payload, event_type=d.event_type, event_id=d.event_id,
                secret=secret, previous_secret=previous, delivered_at=self.clock())
        finally:
            metrics.send_finished()
        metrics.attempt(result.status_code, result.error, result.latency_ms / 1000.0)
        return result

    async def send_counted(self, d: DueDelivery, token: str, attempts: int, started: float,
                           secrets: tuple[str, str | None], manual: bool = False
                           ) -> AttemptResult:
        """Send an attempt already counted as number ``attempts`` and record its outcome."""
        result = await self.send(d, secrets)
        now = self.clock()
        status, next_at = self.next_state(d, attempts, result, manual, now)
        recorded = await self.store.record_attempt(
            delivery=d, token=token, manual=manual, started_at=started,
            status_code=result.status_code, latency_ms=result.latency_ms,
            error=result.error, new_status=status, next_attempt_at=next_at, now=now,
            attempt=attempts)
        self.report(d, attempts, manual, result, status, recorded, now)
        return result


def _log_failures(summary: FailureSummary, now: float) -> None:
    log.warning("webhook.attempts_failed", endpoint=summary.endpoint, failed=summary.failed,
                given_up=summary.given_up, subscriptions=len(summary.subscriptions),
                since=format_ts(summary.since),
                seconds=round(now - summary.since, 1), last_status_code=summary.last_status_code,
                last_error=summary.last_error, last_delivery_id=summary.last_delivery_id)
