"""Following ``depeg.tier-changes``: the vault daemon's view of the depeg monitor's tiers.

Every vault daemon instance reads the topic WHOLE, outside any consumer group: a vault may
hold any token, so no instance can do with a share of the partitions. At start the topic is
read to its true end into the :class:`DepegTable` before any fact is processed (the first
ratings already see every known tier); after that the daemon polls the same reader for new
changes. A change that does not decode is counted and logged, never fatal: the depeg
monitor's contract is its schema, and one bad record must not stop vault ratings.
"""

from __future__ import annotations

from collections.abc import Iterator

from aiokafka import AIOKafkaConsumer, TopicPartition

from .. import metrics
from ..config import KafkaConfig
from ..kafka.closing import close_bounded
from ..kafka.fetched import Record
from ..kafka.readall import read_from_start
from ..kafka.topics import make_consumer
from ..logs import get_logger
from .depeg_link import BadDepegEvent, DepegChange, DepegTable, decode_depeg_change

log = get_logger(__name__)



async def start_follower(kafka: KafkaConfig, table: DepegTable) -> AIOKafkaConsumer:
    """A reader assigned every partition of the tier-changes topic, read to its true end
    into ``table``; the caller polls it for the changes that come later."""
    reader = make_consumer(kafka, group_id=None, client_id=f"{kafka.client_id}-vaults-depeg")
    try:
        await reader.start()
        await reader.topics()  # fills the metadata partitions_for_topic reads
        partitions = reader.partitions_for_topic(kafka.tier_changes_topic) or set()
        if not partitions:
            log.warning("vaults.no_depeg_topic", topic=kafka.tier_changes_topic,
                        note="the depeg link stays off until the topic exists and the "
                             "vault daemon restarts")
        tps = [TopicPartition(kafka.tier_changes_topic, p) for p in sorted(partitions)]

        def load(tp: TopicPartition, records: list[Record]) -> None:
            for change in decode_changes(tp, records):
                table.add(change)

        await read_from_start(reader, tps, load)
    except BaseException:
        await close_bounded(reader.stop(), "reader_stop", "vaults.close_failed")
        raise
    log.info("vaults.depeg_loaded", tokens=len(table), partitions=len(tps))
    return reader


def decode_changes(tp: TopicPartition, records: list[Record]) -> Iterator[DepegChange]:
    """The changes of ``records`` in order; an undecodable one is counted, logged, skipped."""
    for rec in records:
        try:
            yield decode_depeg_change(rec.value)
        except BadDepegEvent as exc:
            metrics.VAULT_DEPEG_CHANGES.labels("undecodable").inc()
            log.warning("vaults.depeg_undecodable", partition=tp.partition,
                        offset=rec.offset, error=str(exc)[:200])
