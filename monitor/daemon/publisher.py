"""Publishing with acknowledgement: send at once, confirm in bulk before a checkpoint.

``send`` hands a record to the producer immediately (low latency for tier changes) and
keeps its delivery future; ``send_all`` hands many at once as one record batch per
partition (one future per batch: the per-record ``send`` path, its metadata wait,
partitioner and future cost more than the monitor's own work at 1 tick per second);
``flush`` returns only when every record sent so far was
acknowledged (``acks`` from config). The ingest loop flushes before it writes token states
and commits offsets, so offsets never run ahead of acknowledged outputs (at-least-once),
while the loop itself never waits for a broker round trip per batch.

A record that failed is sent again after backoff, together with the others that failed, in
their original order: the records are byte-identical and tier changes carry deterministic
event ids, so a duplicate is harmless and a loss is not. (A retried record can land after
later records of the same key; consumers order tier changes by ``timestamp``.)
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from operator import attrgetter

import msgspec
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from .. import metrics
from .keyed import KeyPartitions
from .retry import Backoff, retry

Headers = list[tuple[str, bytes]]


class Outgoing(msgspec.Struct, gc=False):
    """One record for the producer. A struct, not a dataclass: made per output record
    (a rating snapshot, a state), its constructor is C (a dataclass's is a Python
    function: ~1 µs a record). Holds no cycle: untracked by the collector."""

    topic: str
    value: bytes
    key: bytes | None
    partition: int | None
    headers: Headers | None
    #: metrics label: tier_change, rating, dead_letter or state.
    kind: str


#: A record's metrics label (``_settle`` counts a batch's in C).
_KIND = attrgetter("kind")


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
        #: Records handed to the producer, with the future of their request (one record
        #: from ``send``, a record batch from ``send_all``).
        self._inflight: list[tuple[list[Outgoing], asyncio.Future[object]]] = []
        self._unsent: list[Outgoing] = []
        self._keyed = KeyPartitions(producer)

    def __len__(self) -> int:
        return sum(len(recs) for recs, _ in self._inflight) + len(self._unsent)

    async def send(self, topic: str, value: bytes, *, key: bytes | None = None,
                   partition: int | None = None, headers: Headers | None = None,
                   kind: str) -> None:
        """Hand one record to the producer now; its acknowledgement is checked by flush."""
        rec = Outgoing(topic, value, key, partition, headers, kind)
        if self._unsent:  # the broker is already known to be away: keep the order
            self._unsent.append(rec)
            return
        try:
            future = await self._producer.send(topic, value, key=key, partition=partition,
                                               headers=headers)
        except KafkaError:
            self._unsent.append(rec)
            return
        self._inflight.append(([rec], future))

    async def send_all(self, records: list[Outgoing]) -> None:
        """Hand ``records`` to the producer as one record batch per topic and partition
        (keyed records go where ``send`` would put them), each partition's in order;
        acknowledged by ``flush`` like ``send``'s."""
        if self._unsent:  # the broker is already known to be away: keep the order
            self._unsent += records
            return
        groups: dict[tuple[str, int], list[Outgoing]] = {}
        mappers: dict[str, dict[bytes, int] | None] = {}
        try:
            for rec in records:
                partition = rec.partition
                if partition is None:
                    topic = rec.topic
                    if topic not in mappers:
                        mappers[topic] = await self._keyed.mapper(topic)
                    known = mappers[topic]
                    if known is None or rec.key is None:
                        # No partitions known yet, or unkeyed: the producer picks.
                        groups.setdefault((topic, -1), []).append(rec)
                        continue
                    # ``KeyPartitions.of``'s cache read inline (a call per record).
                    cached = known.get(rec.key)
                    partition = cached if cached is not None \
                        else self._keyed.of(topic, rec.key, known)
                group = groups.get((rec.topic, partition))
                if group is None:
                    groups[(rec.topic, partition)] = [rec]
                else:
                    group.append(rec)
        except KafkaError:
            self._unsent += records
            return
        for (topic, partition), recs in groups.items():
            if self._unsent:  # the broker went away meanwhile: the rest waits, in order
                self._unsent += recs
            elif partition < 0:
                for rec in recs:
                    await self.send(rec.topic, rec.value, key=rec.key, headers=rec.headers,
                                    kind=rec.kind)
            else:
                await self._send_batches(topic, partition, recs)

    async def _send_batches(self, topic: str, partition: int, recs: list[Outgoing]) -> None:
        """``recs`` of one partition, in as few record batches as they fit in; what the
        client cannot even queue waits in ``_unsent`` for flush's retries."""
        producer = self._producer
        builder = producer.create_batch()
        start = 0
        try:
            for i, rec in enumerate(recs):
                # A batch's first record always fits (aiokafka's builder): it is full.
                if builder.append(key=rec.key, value=rec.value, timestamp=None,
                                  headers=rec.headers or []) is None:
                    future = await producer.send_batch(builder, topic, partition=partition)
                    self._inflight.append((recs[start:i], future))
                    builder = producer.create_batch()
                    start = i
                    builder.append(key=rec.key, value=rec.value, timestamp=None,
                                   headers=rec.headers or [])
            future = await producer.send_batch(builder, topic, partition=partition)
        except KafkaError:
            self._unsent += recs[start:]
            return
        self._inflight.append((recs[start:], future))

    async def flush(self) -> None:
        """Return once the broker acknowledged every record sent so far."""
        if not self._inflight and not self._unsent:
            return
        remaining = await self._collect()

        async def attempt() -> None:
            nonlocal remaining
            if remaining:
                remaining = await self._send_all(remaining)
            if remaining:
                raise PartialFailure(f"{len(remaining)} records not acknowledged")

        await retry(attempt, what="publish", backoff=self._backoff, abort=self._abort,
                    retry_on=(KafkaError, OSError, PartialFailure),
                    on_failure=self._on_failure, on_recovery=self._on_recovery)

    async def _collect(self) -> list[Outgoing]:
        """Wait for the records in flight; return those that failed plus the unsent."""
        inflight, self._inflight = self._inflight, []
        unsent, self._unsent = self._unsent, []
        return await self._settle(inflight) + unsent

    async def _send_all(self, records: list[Outgoing]) -> list[Outgoing]:
        """One retry pass; returns the records that were not acknowledged, in order."""
        sent: list[tuple[list[Outgoing], asyncio.Future[object]]] = []
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
            sent.append(([rec], future))
        return await self._settle(sent) + unsent

    async def _settle(self, sent: list[tuple[list[Outgoing], asyncio.Future[object]]]
                      ) -> list[Outgoing]:
        results = await asyncio.gather(*(f for _, f in sent), return_exceptions=True)
        failed: list[Outgoing] = []
        done: Counter[str] = Counter()
        for (recs, _), result in zip(sent, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, KafkaError | OSError):
                    raise result
                failed += recs
            else:
                done.update(map(_KIND, recs))
        for kind, n in done.items():
            metrics.EVENTS_PUBLISHED.labels(kind).inc(n)
        for kind, n in Counter(r.kind for r in failed).items():
            metrics.PUBLISH_ERRORS.labels(kind).inc(n)
        return failed
