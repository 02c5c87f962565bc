"""Publishing with acknowledgement: queue records, then wait until the broker has them all.

``flush`` returns only when every queued record was acknowledged (``acks`` from config),
which is what lets the ingest loop commit offsets afterwards (at-least-once). A record that
fails is sent again, in order with the others that failed, after backoff: the records are
byte-identical and tier changes carry deterministic event ids, so a duplicate is harmless
and a loss is not.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from .. import metrics
from .retry import Backoff, retry

Headers = list[tuple[str, bytes]]


@dataclass(slots=True)
class Outgoing:
    topic: str
    value: bytes
    key: bytes | None
    partition: int | None
    headers: Headers | None
    #: metrics label: tier_change, rating, dead_letter or state.
    kind: str


class PartialFailure(Exception):
    """Some records were not acknowledged; they are retried."""


class Publisher:
    def __init__(
        self,
        producer: AIOKafkaProducer,
        backoff: Backoff,
        abort: Callable[[], bool],
        on_failure: Callable[[str, BaseException], None],
        on_recovery: Callable[[str], None],
    ) -> None:
        self._producer = producer
        self._backoff = backoff
        self._abort = abort
        self._on_failure = on_failure
        self._on_recovery = on_recovery
        self._queue: list[Outgoing] = []

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, topic: str, value: bytes, *, key: bytes | None = None,
            partition: int | None = None, headers: Headers | None = None,
            kind: str) -> None:
        self._queue.append(Outgoing(topic, value, key, partition, headers, kind))

    async def flush(self) -> None:
        """Send everything queued and return once the broker acknowledged all of it."""
        if not self._queue:
            return
        remaining, self._queue = self._queue, []

        async def attempt() -> None:
            nonlocal remaining
            remaining = await self._send_all(remaining)
            if remaining:
                raise PartialFailure(f"{len(remaining)} records not acknowledged")

        await retry(attempt, what="publish", backoff=self._backoff, abort=self._abort,
                    retry_on=(KafkaError, OSError, PartialFailure), on_failure=self._on_failure,
                    on_recovery=self._on_recovery)

    async def _send_all(self, records: list[Outgoing]) -> list[Outgoing]:
        """One pass; returns the records that were not acknowledged, in their order."""
        sent: list[tuple[Outgoing, asyncio.Future[object]]] = []
        unsent: list[Outgoing] = []
        for i, rec in enumerate(records):
            try:
                future = await self._producer.send(
                    rec.topic, rec.value, key=rec.key, partition=rec.partition,
                    headers=rec.headers,
                )
            except KafkaError:
                unsent = records[i:]  # the client cannot even queue: the broker is away
                break
            sent.append((rec, future))
        results = await asyncio.gather(*(f for _, f in sent), return_exceptions=True)
        failed: list[Outgoing] = []
        done: Counter[str] = Counter()
        for (rec, _), result in zip(sent, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, KafkaError | OSError):
                    raise result
                failed.append(rec)
            else:
                done[rec.kind] += 1
        for kind, n in done.items():
            metrics.EVENTS_PUBLISHED.labels(kind).inc(n)
        if failed or unsent:
            lost = Counter(r.kind for r in failed + unsent)
            for kind, n in lost.items():
                metrics.PUBLISH_ERRORS.labels(kind).inc(n)
        return failed + unsent
