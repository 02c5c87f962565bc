"""The monitor's topics and the one way to build Kafka clients from ``KafkaConfig``.

``ensure_topics`` is idempotent: it creates what is missing and checks that what exists
can work (the state topic must have at least as many partitions as the ticks topic,
because a token's state is written to the partition number its ticks come from).
Producers are plain (``acks`` from config, no idempotence, no transactions): the embedded
Tansu broker refuses ``InitProducerId``. Delivery guarantees come from deterministic
event ids, not from the producer.
"""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from ..config import KafkaConfig
from ..logs import get_logger
from ..vaults.config import VaultsConfig
from . import fetched
from .readall import READER_FETCH_WAIT_MS

log = get_logger(__name__)

#: Kafka's error code for "topic already exists".
TOPIC_ALREADY_EXISTS = 36

#: Ratings and tier changes are history downstream; a week by default (real Kafka).
RETENTION_MS = str(7 * 24 * 3600 * 1000)


class TopicError(RuntimeError):
    """A topic exists in a shape the monitor cannot use."""


def _specs(config: KafkaConfig, kept: tuple[str, ...], state: str) -> list[NewTopic]:
    """``kept`` topics with ``kafka.partitions`` and retention, then the ``state`` topic,
    compacted: only the newest state per key matters, so compaction keeps it bounded."""
    n, rf = config.partitions, config.replication_factor
    plain = {"retention.ms": RETENTION_MS}
    return [*(NewTopic(name, n, rf, topic_configs=plain) for name in kept),
            NewTopic(state, n, rf, topic_configs={"cleanup.policy": "compact"})]


def topic_specs(config: KafkaConfig) -> list[NewTopic]:
    """Every topic the monitor reads or writes, with its settings."""
    return _specs(config, (config.ticks_topic, config.ratings_topic,
                           config.tier_changes_topic, config.dlq_topic), config.state_topic)


def admin_client(config: KafkaConfig, bootstrap_servers: str | None = None) -> AIOKafkaAdminClient:
    return AIOKafkaAdminClient(
        bootstrap_servers=bootstrap_servers or config.bootstrap_servers,
        client_id=f"{config.client_id}-admin",
        request_timeout_ms=config.request_timeout_ms,
    )


async def ensure_topics(config: KafkaConfig, bootstrap_servers: str | None = None) -> list[str]:
    """Create missing topics; return the names created. Safe to call from every process."""
    admin = admin_client(config, bootstrap_servers)
    await admin.start()
    try:
        created = await _create_missing(admin, topic_specs(config))
        counts = await partition_counts(admin, [config.ticks_topic, config.state_topic])
        if counts[config.state_topic] < counts[config.ticks_topic]:
            raise TopicError(
                f"{config.state_topic} has {counts[config.state_topic]} partitions, fewer than "
                f"{config.ticks_topic} ({counts[config.ticks_topic]}); state is written to "
                "the partition number of the ticks, so it needs at least as many"
            )
        if created:
            log.info("kafka.topics_created", topics=created, partitions=config.partitions)
        return created
    finally:
        await admin.close()


async def _create_missing(admin: AIOKafkaAdminClient, specs: list[NewTopic]) -> list[str]:
    existing = set(await admin.list_topics())
    missing = [t for t in specs if t.name not in existing]
    created: list[str] = []
    if missing:
        response = await admin.create_topics(missing)
        for name, code, message in response.topic_errors:
            if code == 0:
                created.append(name)
            elif code != TOPIC_ALREADY_EXISTS:  # a concurrent creator won the race
                raise TopicError(f"cannot create topic {name}: error {code} {message}")
    return created


def vault_topic_specs(config: KafkaConfig, vaults: VaultsConfig) -> list[NewTopic]:
    """The vault side's topics (``[vaults]``), with ``kafka.partitions`` and retention."""
    return _specs(config, (vaults.facts_topic, vaults.ratings_topic, vaults.dlq_topic),
                  vaults.state_topic)


async def ensure_vault_topics(config: KafkaConfig, vaults: VaultsConfig,
                              bootstrap_servers: str | None = None) -> list[str]:
    """Create the missing vault topics (and check the state topic can hold every facts
    partition's states, as ``ensure_topics`` does for ticks)."""
    admin = admin_client(config, bootstrap_servers)
    await admin.start()
    try:
        created = await _create_missing(admin, vault_topic_specs(config, vaults))
        counts = await partition_counts(admin, [vaults.facts_topic, vaults.state_topic])
        if counts[vaults.state_topic] < counts[vaults.facts_topic]:
            raise TopicError(
                f"{vaults.state_topic} has fewer partitions than {vaults.facts_topic}; vault "
                "state is written to the partition number of its facts")
        if created:
            log.info("kafka.topics_created", topics=created, partitions=config.partitions)
        return created
    finally:
        await admin.close()


async def partition_counts(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, int]:
    described = await admin.describe_topics(topics)
    counts: dict[str, int] = {}
    for entry in described:
        if entry["error_code"]:
            raise TopicError(f"cannot describe topic {entry['topic']}: error {entry['error_code']}")
        counts[entry["topic"]] = len(entry["partitions"])
    return counts


def _acks(config: KafkaConfig) -> int | str:
    return "all" if config.acks in ("all", "-1") else int(config.acks)


def make_producer(config: KafkaConfig, bootstrap_servers: str | None = None,
                  **overrides: Any) -> AIOKafkaProducer:
    """A plain producer: acks from config, no idempotence (see module docstring)."""
    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap_servers or config.bootstrap_servers,
        "client_id": config.client_id,
        "acks": _acks(config),
        "enable_idempotence": False,
        "compression_type": None if config.compression == "none" else config.compression,
        "linger_ms": config.linger_ms,
        "max_batch_size": config.producer_batch_bytes,
        "request_timeout_ms": config.request_timeout_ms,
        "retry_backoff_ms": int(config.retry_backoff_seconds * 1000),
    }
    options.update(overrides)
    return AIOKafkaProducer(**options)


def make_consumer(config: KafkaConfig, *topics: str, group_id: str | None,
                  bootstrap_servers: str | None = None, **overrides: Any) -> AIOKafkaConsumer:
    """A consumer with manual commits (outputs first, then offsets: at-least-once) that
    hands out :class:`~monitor.kafka.fetched.FetchedRecord`s, unless ``overrides`` asks
    for a deserializer (aiokafka's records then, with it applied)."""
    fetched.install()
    deserializes = "key_deserializer" in overrides or "value_deserializer" in overrides
    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap_servers or config.bootstrap_servers,
        "client_id": config.client_id,
        "group_id": group_id,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "request_timeout_ms": config.request_timeout_ms,
        "session_timeout_ms": config.session_timeout_ms,
        "heartbeat_interval_ms": config.heartbeat_interval_ms,
        "max_poll_interval_ms": config.max_poll_interval_ms,
        "retry_backoff_ms": int(config.retry_backoff_seconds * 1000),
        "value_deserializer": None if deserializes else fetched.fetched_value,
    }
    options.update(overrides)
    return AIOKafkaConsumer(*topics, **options)


def make_reader(config: KafkaConfig, client_id: str, **overrides: Any) -> AIOKafkaConsumer:
    """A consumer in no group, made to read partitions to their end and then be stopped
    (``readall.read_to_end``): a fetch at a partition's end comes back after
    ``readall.READER_FETCH_WAIT_MS``, not the broker's long poll."""
    return make_consumer(config, group_id=None, client_id=client_id,
                         fetch_max_wait_ms=READER_FETCH_WAIT_MS, **overrides)


__all__ = [
    "KafkaError", "TopicError", "admin_client", "ensure_topics", "ensure_vault_topics",
    "make_consumer", "make_producer", "make_reader", "partition_counts", "topic_specs",
    "vault_topic_specs",
]
