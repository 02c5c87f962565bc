"""How a daemon calls the broker: retried forever while it runs, bounded after a stop.

The monitor and the vault daemon share one policy (``docs/recovery.md``): a broker outage
is waited out, never given up on (a restart would lose nothing but time), yet a SIGTERM must
end the process, so once ``kafka.shutdown_grace_seconds`` have passed since the stop every
retry gives up with :class:`~monitor.daemon.retry.Aborted` and nothing more is committed.
Failures and recoveries go to a :class:`BrokerReport`: the daemons' ``/readyz``
(:class:`~monitor.daemon.readiness.Readiness`), or the spread stage's log (its readiness
does not follow the broker). Kept in one place so the daemons and the spread stage cannot
drift apart on when they stop waiting.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from ..config import KafkaConfig
from .publisher import Publisher
from .retry import Backoff, retry

#: What a broker call may fail with and still succeed later: the broker or the network.
RETRIABLE = (KafkaError, OSError)
T = TypeVar("T")


class BrokerReport(Protocol):
    """Who hears of a broker call failing and of it working again."""

    def failure(self, what: str, exc: BaseException) -> None: ...

    def recovery(self, what: str) -> None: ...


class BrokerCalls:
    """Retries for one daemon. ``stopped`` says whether a stop was asked for; ``started``
    whether the daemon got as far as its consumer (before that, a stop aborts at once:
    there is no work in flight worth a grace period)."""

    def __init__(self, kafka: KafkaConfig, readiness: BrokerReport,
                 stopped: Callable[[], bool], started: Callable[[], bool]) -> None:
        self.kafka = kafka
        self.readiness = readiness
        self._stopped = stopped
        self._started = started
        self._grace_until: float | None = None

    def backoff(self) -> Backoff:
        """A fresh backoff (each operation starts from the base delay)."""
        return Backoff(self.kafka.retry_backoff_seconds, self.kafka.retry_backoff_max_seconds)

    def abort(self) -> bool:
        """Give up retrying? Never while running; at once if stopped before the daemon
        started; otherwise once ``shutdown_grace_seconds`` have passed since the stop (the
        first call after the stop starts the grace period)."""
        if not self._stopped():
            return False
        if not self._started():
            return True
        if self._grace_until is None:
            self._grace_until = time.monotonic() + self.kafka.shutdown_grace_seconds
        return time.monotonic() > self._grace_until

    async def retry(self, op: Callable[[], Awaitable[T]], what: str) -> T:
        """Run ``op`` until it succeeds or :meth:`abort` says to give up (``Aborted``)."""
        return await retry(op, what=what, backoff=self.backoff(), abort=self.abort,
                           retry_on=RETRIABLE, on_failure=self.readiness.failure,
                           on_recovery=self.readiness.recovery)

    def publisher(self, producer: AIOKafkaProducer) -> Publisher:
        """A publisher on ``producer`` whose sends wait out the broker under this policy,
        its failures and recoveries reported where the calls' are."""
        return Publisher(producer, self.backoff(), self.abort, self.readiness.failure,
                         self.readiness.recovery)
