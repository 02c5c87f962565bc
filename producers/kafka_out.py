"""Publishing ticks to Kafka: topic creation and a batching sender.

The sender does not wait for each record: ``send`` only enqueues (aiokafka batches per
partition), delivery results are collected in the background and checked in bulk, and
``close`` flushes what was sent. So ``--speed max`` runs at the producer's batch rate, and a
Ctrl-C still delivers everything that had been handed to the producer.
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType

from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped, unused-ignore]
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped, unused-ignore]
from aiokafka.errors import KafkaError  # type: ignore[import-untyped, unused-ignore]

from monitor.config import KafkaConfig
from monitor.logs import get_logger
from monitor.ticks import Tick, encode_tick

log = get_logger(__name__)

#: Kafka's "topic already exists" error code (CreateTopics).
TOPIC_ALREADY_EXISTS = 36


class ProduceError(RuntimeError):
    """Publishing failed in a way retrying inside the producer did not fix."""


def bootstrap_from(cli_value: str | None, kafka: KafkaConfig) -> str:
    """``--bootstrap-servers`` wins over ``kafka.bootstrap_servers``; one of them is needed.

    Producers never start the embedded broker: they feed a broker something else runs.
    """
    servers = (cli_value or kafka.bootstrap_servers).strip()
    if not servers:
        raise ProduceError(
            "no broker configured: pass --bootstrap-servers HOST:PORT or set "
            "DEPEG_KAFKA__BOOTSTRAP_SERVERS (`depeg-monitor run` logs where its broker listens)"
        )
    return servers


async def ensure_topic(
    bootstrap_servers: str, topic: str, partitions: int, replication_factor: int
) -> bool:
    """Create ``topic`` unless it exists; True when this call created it.

    Brokers that auto-create topics would make a one-partition topic on first produce,
    which would silently cap the monitor's parallelism, so the topic is made up front
    with the configured partition count.
    """
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        if topic in await admin.list_topics():
            return False
        response = await admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)]
        )
        for _name, code, *rest in response.topic_errors:
            if code not in (0, TOPIC_ALREADY_EXISTS):
                raise ProduceError(f"cannot create topic {topic}: error {code} {rest}")
        created = all(code == 0 for _n, code, *_ in response.topic_errors)
        if created:
            log.info("topic_created", topic=topic, partitions=partitions,
                     replication_factor=replication_factor)
        return created
    finally:
        await admin.close()


class TickSender:
    """An aiokafka producer that publishes ticks without awaiting each delivery."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        *,
        acks: str = "all",
        max_pending: int = 20_000,
        linger_ms: int = 5,
    ) -> None:
        self.topic = topic
        self.sent = 0
        self.failed = 0
        self._max_pending = max_pending
        self._pending: deque[asyncio.Future[object]] = deque()
        self._first_error: BaseException | None = None
        self._producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap_servers,
            acks=acks if acks == "all" else int(acks),
            linger_ms=linger_ms,
            max_batch_size=256 * 1024,
            # The embedded broker refuses idempotent producers (DESIGN.md).
            enable_idempotence=False,
        )

    async def start(self) -> None:
        await self._producer.start()

    async def send(self, tick: Tick) -> None:
        """Hand one tick to the producer; blocks only when its buffer is full."""
        future = await self._producer.send(
            self.topic, encode_tick(tick), key=tick.key.encode(), timestamp_ms=int(tick.ts * 1000)
        )
        self._pending.append(future)
        self.sent += 1
        if len(self._pending) > self._max_pending:
            await self._settle(len(self._pending) // 2)

    async def _settle(self, count: int) -> None:
        """Wait for the oldest ``count`` deliveries and record failures."""
        batch = [self._pending.popleft() for _ in range(min(count, len(self._pending)))]
        for result in await asyncio.gather(*batch, return_exceptions=True):
            if isinstance(result, BaseException):
                self.failed += 1
                if self._first_error is None:
                    self._first_error = result
                    log.error("publish_failed", topic=self.topic, error=str(result))

    async def flush(self) -> None:
        await self._producer.flush()
        await self._settle(len(self._pending))

    async def close(self) -> None:
        """Flush everything handed over, then stop; raises if any record was lost."""
        try:
            await self.flush()
        finally:
            await self._producer.stop()
        if self._first_error is not None:
            raise ProduceError(
                f"{self.failed} of {self.sent} records were not delivered: {self._first_error}"
            )

    async def __aenter__(self) -> TickSender:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()


async def open_sender(bootstrap_servers: str, kafka: KafkaConfig) -> TickSender:
    """Make sure the ticks topic exists, then start a sender on it."""
    try:
        await ensure_topic(bootstrap_servers, kafka.ticks_topic, kafka.partitions,
                           kafka.replication_factor)
        sender = TickSender(bootstrap_servers, kafka.ticks_topic, acks=kafka.acks)
        await sender.start()
    except KafkaError as exc:
        raise ProduceError(f"cannot reach Kafka at {bootstrap_servers}: {exc}") from exc
    return sender
