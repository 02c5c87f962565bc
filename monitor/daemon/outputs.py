"""What the daemon writes for each engine output and each bad record.

Tier changes go to the tier-changes topic and rating snapshots to the ratings topic, both
keyed ``chain:token`` (one token's records stay in one partition, in order), as the exact
bytes of ``records.encode``; bad tick records become dead letters. Counting happens here,
once, for stats, metrics and the per-batch dead-letter log line.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from .. import metrics
from ..config import KafkaConfig
from ..engine import Output
from ..logs import get_logger
from ..records import ENCODER, RatingSnapshot, TierChangeEvent
from ..ticks import BadTick
from .deadletter import dead_letter
from .lifecycle import ConsumerStats
from .publisher import Outgoing, Publisher

log = get_logger(__name__)
#: ``records.encode`` without its Python frame: the same encoder, so the same bytes.
_encode = ENCODER.encode


@dataclass(slots=True)
class DaemonStats(ConsumerStats):
    ticks: int = 0
    tier_changes: int = 0
    batches: int = 0
    restored_tokens: int = 0


class OutputWriter:
    def __init__(self, kafka: KafkaConfig, publisher: Publisher, stats: DaemonStats) -> None:
        self.kafka = kafka
        self.publisher = publisher
        self.stats = stats
        self._dlq_reasons: Counter[str] = Counter()
        #: token address -> (chain, record key ``chain:token``), for the snapshots' keys.
        self._keys: dict[str, tuple[str, bytes]] = {}

    async def emit(self, outputs: list[Output]) -> None:
        """Hand ``outputs`` to the producer together (``Publisher.send_all``), in order."""
        k = self.kafka
        ratings_topic = k.ratings_topic
        records: list[Outgoing] = []
        snapshots: list[RatingSnapshot] = []
        keys_of = self._keys.get
        for out in outputs:
            if isinstance(out, TierChangeEvent):
                d = out.data
                records.append(Outgoing(k.tier_changes_topic, _encode(out),
                                        self._key(d.chain, d.token_address), None, None,
                                        "tier_change"))
                self.stats.tier_changes += 1
                metrics.tier_changed(d.old_tier, d.new_tier)
                log.info("monitor.tier_change", event_id=out.event_id, at=out.timestamp,
                         chain=d.chain, token=d.token_address, symbol=d.symbol,
                         old_tier=d.old_tier, new_tier=d.new_tier, rating=d.risk_score)
            else:
                # The record key by the snapshot's token string (the engine's one object
                # per token, its hash kept): no key formatted and encoded per snapshot.
                known = keys_of(out.token_address)
                key = known[1] if known is not None and known[0] == out.chain \
                    else self._key(out.chain, out.token_address)
                records.append(Outgoing(ratings_topic, _encode(out), key, None, None,
                                        "rating"))
                snapshots.append(out)
        if snapshots:
            self.stats.ratings += len(snapshots)
            metrics.token_series.observe_all(snapshots)
        await self.publisher.send_all(records)

    def _key(self, chain: str, token: str) -> bytes:
        """``chain:token`` as the record key; kept per token (the first chain seen keeps
        an address found on two chains: the other chain's is formatted each time)."""
        key = f"{chain}:{token}".encode()
        self._keys.setdefault(token, (chain, key))
        return key

    async def dead_letter(self, rec: Any, exc: BadTick) -> None:
        """``rec`` is the fetched record that could not be used."""
        dl = dead_letter(reason=exc.reason, detail=exc.detail, topic=rec.topic,
                         partition=rec.partition, offset=rec.offset, key=rec.key,
                         value=rec.value, prefix_bytes=self.kafka.dlq_value_prefix_bytes)
        await self.publisher.send(self.kafka.dlq_topic, dl.value, key=dl.key,
                                  headers=dl.headers, kind="dead_letter")
        self.stats.dead_letters += 1
        self._dlq_reasons[exc.reason] += 1
        metrics.dead_lettered(exc.reason)

    def log_dead_letters(self) -> None:
        """One warning per batch with the count per reason (not one line per record)."""
        if self._dlq_reasons:
            log.warning("monitor.dead_letters", topic=self.kafka.dlq_topic,
                        **self._dlq_reasons)
            self._dlq_reasons.clear()
