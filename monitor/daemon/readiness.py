"""Whether the monitor is ready, for ``/readyz`` (registered as the ``monitor`` check).

Not ready while starting (no partition assignment yet), while a broker operation is
failing (set by the retry callbacks, cleared on recovery), while a batch has been stuck
longer than ``kafka.ready_stall_seconds``, and while stopping. An idle daemon does no
broker I/O that would fail, so a cheap metadata probe runs every few seconds as well.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from aiokafka.errors import KafkaError

from .. import metrics
from ..logs import get_logger

log = get_logger(__name__)


class Readiness:
    def __init__(self, stall_seconds: float, stopping: Callable[[], bool],
                 describe: Callable[[], str]) -> None:
        self.stall_seconds = stall_seconds
        self._stopping = stopping
        self._describe = describe
        #: Set once the instance joined its group and restored its partitions' state.
        self.joined = asyncio.Event()
        #: Wall (monotonic) time the batch in progress started, None between batches.
        self.busy_since: float | None = None
        self.broker_error: str | None = None

    def failure(self, what: str, exc: BaseException) -> None:
        self.broker_error = f"{what}: {type(exc).__name__}: {exc}"[:300]
        metrics.BROKER_CONNECTED.labels("monitor").set(0)

    def recovery(self, what: str) -> None:
        self.broker_error = None
        metrics.BROKER_CONNECTED.labels("monitor").set(1)

    async def probe(self, consumer: Any,
                    on_topics: Callable[[set[str]], None] | None = None) -> None:
        """Forever: a metadata round trip every few seconds (run as a task); the topic
        names it returns go to ``on_topics`` (the daemon checks its topics still exist)."""
        interval = max(1.0, min(5.0, self.stall_seconds / 3))
        while True:
            await asyncio.sleep(interval)
            try:
                topics = await asyncio.wait_for(consumer.topics(), timeout=interval)
            except (TimeoutError, KafkaError, OSError) as exc:
                if self.broker_error is None:
                    log.warning("monitor.broker_unreachable", error=type(exc).__name__)
                self.failure("probe", exc)
            else:
                if on_topics is not None:
                    on_topics(set(topics))
                if self.broker_error is not None and self.broker_error.startswith("probe"):
                    log.info("monitor.broker_reachable")
                    self.recovery("probe")

    async def check(self) -> tuple[bool, str]:
        if self._stopping():
            return False, "stopping"
        if self.broker_error:
            return False, f"broker unavailable ({self.broker_error})"
        started = self.busy_since
        if started is not None and time.monotonic() - started > self.stall_seconds:
            return False, f"batch stuck for {time.monotonic() - started:.0f}s"
        if not self.joined.is_set():
            return False, "waiting for a partition assignment"
        return True, self._describe()
