"""Starting and stopping a daemon's Kafka clients, and committing its offsets through a
rebalance.

Shared by the monitor, the vault daemon and the spread stage. A client that fails to start
is stopped before the error propagates (aiokafka leaves its connections and tasks open
otherwise, and the caller retries with a new client). A commit the group refuses because
it moved on (``CommitFailedError``/``IllegalStateError``) is not an error: the partitions'
new owner resumes from the states written just before, which are exact at their offsets,
so nothing is lost; it is logged and reported as not committed.
"""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError

from ..config import KafkaConfig
from ..kafka.closing import close_bounded
from ..kafka.topics import make_consumer, make_producer
from ..logs import get_logger
from .rebalance import Listener

log = get_logger(__name__)

async def start_producer(kafka: KafkaConfig) -> AIOKafkaProducer:
    producer = make_producer(kafka)
    try:
        await producer.start()
    except BaseException:
        await close_bounded(producer.stop(), "producer_stop", "kafka.start_cleanup_failed")
        raise
    return producer


async def start_group_consumer(kafka: KafkaConfig, group: str, topic: str,
                               listener: Listener) -> AIOKafkaConsumer:
    """A consumer in ``group`` subscribed to ``topic``; ``listener`` gets the rebalances."""
    consumer = make_consumer(kafka, group_id=group)
    try:
        await consumer.start()
        consumer.subscribe([topic], listener=listener)
    except BaseException:
        await close_bounded(consumer.stop(), "consumer_stop", "kafka.start_cleanup_failed")
        raise
    return consumer


async def start_assigned_consumer(kafka: KafkaConfig, client_id: str) -> AIOKafkaConsumer:
    """A consumer in no group, named ``client_id``: the caller assigns its partitions and
    seeks them itself (the spread stage reads every partition and keeps its own offsets)."""
    consumer = make_consumer(kafka, group_id=None, client_id=client_id)
    try:
        await consumer.start()
    except BaseException:
        await close_bounded(consumer.stop(), "consumer_stop", "kafka.start_cleanup_failed")
        raise
    return consumer


async def commit_unless_fenced(consumer: AIOKafkaConsumer, offsets: dict[TopicPartition, int],
                               fenced_event: str) -> bool:
    """Commit ``offsets``; False (logged as ``fenced_event``) when the group had moved on.
    Broker errors propagate, for the caller's retry."""
    try:
        await consumer.commit(offsets)
    except (CommitFailedError, IllegalStateError) as exc:
        log.warning(fenced_event, error=str(exc)[:200],
                    partitions=sorted(tp.partition for tp in offsets))
        return False
    return True
