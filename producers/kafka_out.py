"""Publishing ticks to Kafka: a batching sender on the shared client factory.

The sender does not wait for each record: ``send`` only enqueues (aiokafka batches per
partition), delivery results are collected in the background and checked in bulk, and
``close`` flushes what was sent. So ``--speed max`` runs at the producer's batch rate, and a
Ctrl-C still delivers everything that had been handed to the producer.
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType

from monitor.config import Config, KafkaConfig
from monitor.kafka.topics import KafkaError, TopicError, ensure_topics, make_producer
from monitor.logs import get_logger
from monitor.runstate import discover_bootstrap
from monitor.ticks import Tick, encode_tick

log = get_logger(__name__)


class ProduceError(RuntimeError):
    """Publishing failed in a way retrying inside the producer did not fix."""


def bootstrap_from(cli_value: str | None, kafka: KafkaConfig,
                   config: Config | None = None) -> str:
    """``--bootstrap-servers`` wins over ``kafka.bootstrap_servers``; with neither, the
    broker of a ``depeg-monitor run`` on this machine (its state file); one is needed.

    Producers never start the embedded broker: they feed a broker something else runs.
    """
    servers = (cli_value or kafka.bootstrap_servers).strip()
    if not servers and config is not None:
        servers = discover_bootstrap(config) or ""
    if not servers:
        raise ProduceError(
            "no broker configured and no `depeg-monitor run` found on this machine: start "
            "one, or pass --bootstrap-servers HOST:PORT / set DEPEG_KAFKA__BOOTSTRAP_SERVERS"
        )
    return servers


class TickSender:
    """An aiokafka producer that publishes ticks without awaiting each delivery."""

    def __init__(
        self, bootstrap_servers: str, kafka: KafkaConfig, *, max_pending: int = 20_000
    ) -> None:
        self.topic = kafka.ticks_topic
        self.sent = 0
        self.failed = 0
        self._max_pending = max_pending
        self._pending: deque[asyncio.Future[object]] = deque()
        self._first_error: BaseException | None = None
        # Plain producer from the shared factory (acks from config, no idempotence: the
        # embedded broker refuses it); bigger batches than the default 16 KB for replay.
        self._producer = make_producer(kafka, bootstrap_servers,
                                       client_id=f"{kafka.client_id}-producer",
                                       max_batch_size=256 * 1024)

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
    """Make sure the topics exist, then start a sender on the ticks topic.

    Topics are created up front with ``kafka.partitions``: a broker that auto-creates on
    first produce would make a one-partition topic and cap the monitor's parallelism.
    """
    try:
        await ensure_topics(kafka, bootstrap_servers)
        sender = TickSender(bootstrap_servers, kafka)
        await sender.start()
    except KafkaError as exc:
        raise ProduceError(f"cannot reach Kafka at {bootstrap_servers}: {exc}") from exc
    except TopicError as exc:
        raise ProduceError(str(exc)) from exc
    return sender
