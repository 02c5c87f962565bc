"""Publishing ticks to Kafka: a batching sender on the shared client factory.

The sender does not wait for each record: ``send`` only enqueues (aiokafka batches per
partition), delivery results are collected in the background and checked in bulk, and
``close`` flushes what was sent and checks the broker still holds it (a memory-only broker
that restarted loses acknowledged records; the command then exits non-zero). So
``--speed max`` runs at the producer's batch rate, and a Ctrl-C still delivers everything
that had been handed to the producer.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any

from aiokafka import TopicPartition

from monitor.config import Config, KafkaConfig
from monitor.kafka.closing import close_bounded
from monitor.kafka.readall import true_end_offsets
from monitor.kafka.topics import (
    KafkaError,
    TopicError,
    ensure_topics,
    ensure_vault_topics,
    make_producer,
    make_reader,
)
from monitor.logs import get_logger
from monitor.runstate import discover_bootstrap
from monitor.ticks import Tick, encode_tick
from monitor.vaults.facts import FactUpdate, encode_update

log = get_logger(__name__)


class ProduceError(RuntimeError):
    """Publishing failed in a way retrying inside the producer did not fix."""

    #: The command's exit code (README, "Exit codes"): 1 = a runtime failure.
    exit_code = 1


class NoBrokerConfigured(ProduceError):
    """Nothing says where the broker is: a configuration error the operator fixes, exit 2
    as for every command (the daemons too), not a runtime failure."""

    exit_code = 2


def run_produce(name: str, main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """``depeg-monitor produce <name>``'s exit code: ``main()`` run to its end, or a
    :class:`ProduceError` printed on stderr with the command's name and its exit code."""
    try:
        return asyncio.run(main())
    except ProduceError as exc:
        print(f"depeg-monitor produce {name}: {exc}", file=sys.stderr)
        return exc.exit_code


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
        raise NoBrokerConfigured(
            "no broker configured and no `depeg-monitor run` found on this machine: start "
            "one, or pass --bootstrap-servers HOST:PORT / set DEPEG_KAFKA__BOOTSTRAP_SERVERS"
        )
    return servers


class TickSender:
    """An aiokafka producer that publishes ticks without awaiting each delivery."""

    def __init__(
        self, bootstrap_servers: str, kafka: KafkaConfig, *, max_pending: int = 20_000,
        topic: str | None = None,
    ) -> None:
        #: kafka.ticks_topic unless given (FactSender publishes vault facts through it).
        self.topic = topic or kafka.ticks_topic
        self.sent = 0
        self.failed = 0
        self._max_pending = max_pending
        self._pending: deque[asyncio.Future[Any]] = deque()
        self._first_error: BaseException | None = None
        #: partition -> the highest offset the broker acknowledged there.
        self._acked: dict[int, int] = {}
        self._lost_by_broker = 0
        self._kafka = kafka
        self._bootstrap_servers = bootstrap_servers
        # Plain producer from the shared factory (acks from config, no idempotence: the
        # embedded broker refuses it); bigger batches than the default 16 KB for replay.
        self._producer = make_producer(kafka, bootstrap_servers,
                                       client_id=f"{kafka.client_id}-producer",
                                       max_batch_size=256 * 1024)

    async def start(self) -> None:
        await self._producer.start()

    async def send(self, tick: Tick) -> None:
        """Hand one tick to the producer; blocks only when its buffer is full."""
        await self.send_record(tick.key.encode(), encode_tick(tick), tick.ts)

    async def send_record(self, key: bytes, value: bytes, ts: float) -> None:
        """Hand one encoded record (CreateTime = its event time) to the producer."""
        future = await self._producer.send(
            self.topic, value, key=key, timestamp_ms=int(ts * 1000)
        )
        self._pending.append(future)
        self.sent += 1
        if len(self._pending) > self._max_pending:
            await self._settle(len(self._pending) // 2)

    async def _settle(self, count: int) -> None:
        """Wait for the oldest ``count`` deliveries and record failures.

        A delivery report is not the end of the story: a broker that restarts empty (the
        memory-only embedded one, or a replaced cluster) loses records it acknowledged.
        Its offsets then start again from 0, so an acknowledged offset that is not above
        the previous one of the same partition means the earlier records are gone.
        """
        batch = [self._pending.popleft() for _ in range(min(count, len(self._pending)))]
        for result in await asyncio.gather(*batch, return_exceptions=True):
            if isinstance(result, BaseException):
                self._fail(result)
                continue
            meta: Any = result  # aiokafka's RecordMetadata (the futures are typed object)
            partition, offset = int(meta.partition), int(meta.offset)
            previous = self._acked.get(partition, -1)
            if offset <= previous:
                self._lost_by_broker += previous + 1
                self._fail(ProduceError(
                    f"{self.topic}[{partition}]: offsets restarted at {offset} after "
                    f"{previous}: the broker lost the records it had acknowledged"))
            self._acked[partition] = offset

    def _fail(self, error: BaseException) -> None:
        self.failed += 1
        if self._first_error is None:
            self._first_error = error
            log.error("produce.publish_failed", topic=self.topic, error=str(error))

    async def flush(self) -> None:
        await self._producer.flush()
        await self._settle(len(self._pending))

    async def verify_kept(self) -> None:
        """After the last delivery: does every partition still hold the records the
        broker acknowledged? (Read to the true end, ``monitor.kafka.readall``.)"""
        if not self._acked:
            return
        reader = make_reader(self._kafka, f"{self._kafka.client_id}-producer-check",
                             bootstrap_servers=self._bootstrap_servers)
        await reader.start()
        try:
            tps = [TopicPartition(self.topic, p) for p in sorted(self._acked)]
            ends = await true_end_offsets(reader, tps, stall_seconds=10.0)
        finally:
            await close_bounded(reader.stop(), "reader_stop", "produce.close_failed")
        for tp, end in ends.items():
            if end <= self._acked[tp.partition]:
                self._lost_by_broker += self._acked[tp.partition] + 1 - end
                self._fail(ProduceError(
                    f"{self.topic}[{tp.partition}] ends at {end} but the broker had "
                    f"acknowledged offset {self._acked[tp.partition]}: records were lost"))

    async def close(self) -> None:
        """Flush everything handed over, check the broker kept it, then stop; raises if
        any record was not delivered or was lost after its acknowledgement."""
        try:
            await self.flush()
            if self._first_error is None:
                try:
                    await self.verify_kept()
                except KafkaError as exc:
                    self._fail(exc)
        finally:
            await self._producer.stop()
        if self._first_error is not None:
            lost = f" (at least {self._lost_by_broker} lost after acknowledgement)" \
                if self._lost_by_broker else ""
            raise ProduceError(
                f"{self.failed} of {self.sent} records were not delivered{lost}: "
                f"{self._first_error}"
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


class FactSender:
    """Publishes vault fact records (``vaults.facts``, keyed ``chain:vault``) through a
    :class:`TickSender` on that topic: same batching, same delivery checks."""

    def __init__(self, sender: TickSender) -> None:
        self.sender = sender

    async def send(self, update: FactUpdate) -> None:
        await self.sender.send_record(update.key.encode(), encode_update(update), update.ts)

    async def close(self) -> None:
        await self.sender.close()


async def open_fact_sender(bootstrap_servers: str, config: Config) -> FactSender:
    """Make sure the vault topics exist, then start a sender on ``vaults.facts_topic``."""
    try:
        await ensure_vault_topics(config.kafka, config.vaults, bootstrap_servers)
        sender = TickSender(bootstrap_servers, config.kafka, topic=config.vaults.facts_topic)
        await sender.start()
    except KafkaError as exc:
        raise ProduceError(f"cannot reach Kafka at {bootstrap_servers}: {exc}") from exc
    except TopicError as exc:
        raise ProduceError(str(exc)) from exc
    return FactSender(sender)
