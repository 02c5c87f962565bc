"""Retrying broker operations: exponential backoff with jitter, forever, unless aborted.

The daemon never gives up on the broker by itself (an outage ends; a restart would lose
nothing but time), but a shutdown must end: ``abort()`` says when the grace period of a
SIGTERM is over, and then :class:`Aborted` unwinds without committing anything.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..logs import get_logger

log = get_logger(__name__)

T = TypeVar("T")


class Aborted(Exception):
    """Shutdown was requested and its grace period ran out while the broker was away."""


class Backoff:
    """``base``, 2x``base``, ... up to ``cap`` seconds, each with +-20 % jitter."""

    def __init__(self, base: float, cap: float) -> None:
        self.base = max(base, 0.01)
        self.cap = max(cap, self.base)
        self.attempt = 0

    def next_delay(self) -> float:
        delay = min(self.cap, self.base * math.pow(2.0, min(self.attempt, 30)))
        self.attempt += 1
        return delay * random.uniform(0.8, 1.2)

    def reset(self) -> None:
        self.attempt = 0


async def retry(
    op: Callable[[], Awaitable[T]],
    *,
    what: str,
    backoff: Backoff,
    abort: Callable[[], bool],
    retry_on: tuple[type[BaseException], ...],
    on_failure: Callable[[str, BaseException], None] | None = None,
    on_recovery: Callable[[str], None] | None = None,
) -> T:
    """Run ``op`` until it succeeds; exceptions in ``retry_on`` are retried after backoff."""
    failures = 0
    while True:
        try:
            result = await op()
        except retry_on as exc:
            failures += 1
            if on_failure:
                on_failure(what, exc)
            if abort():
                raise Aborted(f"{what}: gave up during shutdown: {exc}") from exc
            delay = backoff.next_delay()
            log.warning("kafka.retry", op=what, attempt=failures, delay=round(delay, 2),
                        error=f"{type(exc).__name__}: {exc}"[:300])
            await asyncio.sleep(delay)
            continue
        if failures:
            log.info("kafka.recovered", op=what, failed_attempts=failures)
            if on_recovery:
                on_recovery(what)
        backoff.reset()
        return result
