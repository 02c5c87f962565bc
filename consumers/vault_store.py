"""The vault half of the store writer: ``vaults.facts`` and ``vaults.ratings`` into the
vault store (:mod:`monitor.storage.vaults`).

Facts are decoded and merged with the vault engine's own functions
(:func:`monitor.vaults.facts.decode_facts`, :func:`~monitor.vaults.facts.apply_update`), so
the stored facts are exactly the engine's view of the vault; rating records are decoded
with :func:`monitor.vaults.records.decode_rating`. A record that does not decode is counted,
logged with its topic, partition and offset, and skipped (the vault daemon dead-letters bad
facts with the reason; the store writer only must not stall on them).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from monitor import metrics
from monitor.config import Config
from monitor.logs import get_logger
from monitor.metrics import STORE_WRITE_ERRORS, STORE_WRITES
from monitor.storage.vaults import FactsUpdate, RatingRow, VaultStore
from monitor.timefmt import parse_ts
from monitor.vaults.facts import BadFacts, FactUpdate, VaultFacts, apply_update, decode_facts
from monitor.vaults.records import VaultRating, decode_rating

log = get_logger(__name__)

#: The per-tier/verdict gauges are recounted from the store at most this often (after a
#: batch with ratings, or on an idle poll when ratings were written since the last count).
COUNT_INTERVAL_SECONDS = 2.0


def fold_facts(stored: Mapping[str, Any] | None,
               updates: Sequence[FactUpdate]) -> Mapping[str, Any]:
    """Stored facts (JSON object) + updates in order -> merged facts, with the engine's merge.

    The stored object is the engine's :class:`VaultFacts` as JSON (unknown facts omitted)."""
    facts = msgspec.convert(stored or {}, VaultFacts)
    for update in updates:
        facts = apply_update(facts, update)
    built: Mapping[str, Any] = msgspec.to_builtins(facts)
    return built


def rating_row(record: VaultRating, raw: bytes) -> RatingRow:
    return RatingRow(record.chain, record.vault, parse_ts(record.ts), record.rating,
                     record.tier, record.verdict, tuple(record.tags), record.attention_needed,
                     raw)


@dataclass
class VaultBatch:
    facts: list[FactsUpdate[FactUpdate]] = field(default_factory=list)
    ratings: list[RatingRow] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.facts or self.ratings)


class VaultRecords:
    """Decodes the vault topics' records of a consumer batch and writes them."""

    def __init__(self, config: Config, store: VaultStore) -> None:
        self.facts_topic = config.vaults.facts_topic
        self.ratings_topic = config.vaults.ratings_topic
        self.store = store
        self.undecodable = 0
        self._next_count = 0.0
        self._dirty = True

    @property
    def topics(self) -> tuple[str, str]:
        return self.facts_topic, self.ratings_topic

    def split(self, records: Sequence[Any]) -> VaultBatch:
        batch = VaultBatch()
        for rec in records:
            if rec.topic not in self.topics:
                continue
            raw = rec.value or b""
            kind = "vault_facts" if rec.topic == self.facts_topic else "vault_rating"
            try:
                if b"\\u0000" in raw:  # PostgreSQL text cannot hold NUL
                    raise ValueError("NUL character in a string")
                if rec.topic == self.facts_topic:
                    update = decode_facts(raw)
                    batch.facts.append(FactsUpdate(update.chain, update.vault, update.ts,
                                                   update))
                else:
                    record = decode_rating(raw)
                    batch.ratings.append(rating_row(record, raw))
            except (BadFacts, msgspec.DecodeError, msgspec.ValidationError,
                    ValueError) as exc:
                self.undecodable += 1
                metrics.RECORDS_UNDECODABLE.labels("store").inc()
                STORE_WRITE_ERRORS.labels(kind).inc()
                log.warning("store_writer.undecodable_record_skipped", topic=rec.topic,
                            partition=rec.partition, offset=rec.offset, reason=str(exc)[:300],
                            value_prefix=raw[:120].decode("utf-8", "replace"))
        return batch

    async def write(self, batch: VaultBatch) -> None:
        await self.store.write_batch(batch.facts, fold_facts, batch.ratings)

    async def write_one_by_one(self, batch: VaultBatch, is_data_error: Any) -> None:
        """After a data error: each record alone; ones the database refuses are skipped."""
        singles = [VaultBatch([f], []) for f in batch.facts]
        singles += [VaultBatch([], [r]) for r in batch.ratings]
        for one in singles:
            try:
                await self.write(one)
            except Exception as exc:
                if not is_data_error(exc):
                    raise
                self.undecodable += 1
                kind = "vault_facts" if one.facts else "vault_rating"
                STORE_WRITE_ERRORS.labels(kind).inc()
                key = one.facts[0] if one.facts else one.ratings[0]
                log.error("store_writer.record_refused_by_database", error=str(exc)[:300],
                          chain=key.chain, vault=key.vault, kind=kind)

    async def written(self, batch: VaultBatch) -> None:
        """After the batch landed: counters, and the per-tier/verdict gauges now and then."""
        STORE_WRITES.labels("vault_facts").inc(len(batch.facts))
        STORE_WRITES.labels("vault_rating").inc(len(batch.ratings))
        self._dirty = self._dirty or bool(batch.ratings)
        await self.refresh_counts()

    async def refresh_counts(self) -> None:
        """Recount the stored vaults per tier and verdict when ratings changed since the
        last count and the interval has passed (one GROUP BY over the vaults table)."""
        now = time.monotonic()
        if not self._dirty or now < self._next_count:
            return
        self._next_count = now + COUNT_INTERVAL_SECONDS
        self._dirty = False
        try:
            metrics.set_stored_vaults(await self.store.counts())
        except Exception as exc:  # a gauge is not worth stopping the writer for
            self._dirty = True
            log.warning("store_writer.vault_count_failed", error=str(exc)[:300])
