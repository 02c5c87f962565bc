"""The vault store: merged facts and the latest rating per vault, and a rating history.

Writes come in batches from the store writer, one transaction per batch, and are
idempotent so a re-delivered batch leaves the same rows:

* facts are partial updates; each vault's updates of a batch are folded onto its stored
  facts with the engine's own merge (passed in as ``fold``, never re-implemented here).
  Merging is "last write per field wins", so folding a suffix of the stream again gives
  the same facts;
* the latest rating only moves forward in event time, history rows are keyed by vault and
  event time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from .db import Database, migrate
from .vaults_schema import COMPONENT, MIGRATIONS

#: Days of rating history kept (E5 shows the last 90 days of a vault).
HISTORY_DAYS = 90

U = TypeVar("U")
#: (stored facts as a JSON object or None, one vault's updates in order) -> merged facts.
Fold = Callable[[Mapping[str, Any] | None, Sequence[U]], Mapping[str, Any]]


@dataclass(frozen=True)
class FactsUpdate(Generic[U]):
    """One decoded ``vaults.facts`` record, in arrival (partition) order."""

    chain: str
    vault: str
    ts: float
    update: U


@dataclass(frozen=True)
class RatingRow:
    """One ``vaults.ratings`` record, decoded by the engine's decoder."""

    chain: str
    vault: str
    ts: float
    rating: float | None
    tier: str
    verdict: str
    tags: tuple[str, ...]
    attention_needed: bool
    record: bytes  # the record as published, returned by the API as is


def tags_column(tags: Sequence[str]) -> str:
    """``",a,b,"``: a tag matches with ``LIKE '%,a,%'`` on both databases."""
    return "," + ",".join(sorted(tags)) + "," if tags else ","


def _number(value: Any) -> float | None:
    """Facts numbers may be JSON numbers or decimal strings; anything else is unknown."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def facts_columns(facts: Mapping[str, Any]) -> tuple[Any, ...]:
    """The columns E4 filters and sorts on, copied out of the merged facts."""
    underlying = _text(facts.get("underlying_address"))
    return (_text(facts.get("name")), _text(facts.get("symbol")), _text(facts.get("protocol")),
            _text(facts.get("contract_type")), _text(facts.get("underlying_symbol")),
            underlying.lower() if underlying else None, _text(facts.get("underlying_risk")),
            _number(facts.get("tvl_usd")), _number(facts.get("apy_pct")),
            _number(facts.get("looping_rate")))


_UPSERT_FACTS = """
INSERT INTO vaults (chain, vault, facts_ts, name, symbol, protocol, contract_type,
  underlying_symbol, underlying_address, underlying_risk, tvl_usd, apy_pct, looping_rate)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (chain, vault) DO UPDATE SET
  facts_ts = excluded.facts_ts, name = excluded.name, symbol = excluded.symbol,
  protocol = excluded.protocol, contract_type = excluded.contract_type,
  underlying_symbol = excluded.underlying_symbol,
  underlying_address = excluded.underlying_address,
  underlying_risk = excluded.underlying_risk, tvl_usd = excluded.tvl_usd,
  apy_pct = excluded.apy_pct, looping_rate = excluded.looping_rate
"""

_UPSERT_FACTS_DOC = """
INSERT INTO vault_documents (chain, vault, facts) VALUES ($1, $2, $3)
ON CONFLICT (chain, vault) DO UPDATE SET facts = excluded.facts
"""

_UPSERT_RATING = """
INSERT INTO vaults (chain, vault, rating_ts, rating, tier, verdict, attention_needed, tags)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (chain, vault) DO UPDATE SET
  rating_ts = excluded.rating_ts, rating = excluded.rating, tier = excluded.tier,
  verdict = excluded.verdict, attention_needed = excluded.attention_needed,
  tags = excluded.tags
WHERE vaults.rating_ts IS NULL OR excluded.rating_ts >= vaults.rating_ts
"""

_UPSERT_RATING_DOC = """
INSERT INTO vault_documents (chain, vault, rating_ts, record) VALUES ($1, $2, $3, $4)
ON CONFLICT (chain, vault) DO UPDATE SET
  rating_ts = excluded.rating_ts, record = excluded.record
WHERE vault_documents.rating_ts IS NULL OR excluded.rating_ts >= vault_documents.rating_ts
"""

_UPSERT_HISTORY = """
INSERT INTO vault_rating_history (chain, vault, ts, rating, tier, verdict, tags,
  attention_needed)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (chain, vault, ts) DO UPDATE SET
  rating = excluded.rating, tier = excluded.tier, verdict = excluded.verdict,
  tags = excluded.tags, attention_needed = excluded.attention_needed
"""


@dataclass
class VaultWriteStats:
    facts: int = 0
    vaults_touched: int = 0
    ratings: int = 0


#: In every write transaction that changes what the vault routes show: their read
#: caches key on it (monitor/api/readcache.py).
BUMP_VERSION = "UPDATE vaults_version SET version = version + 1 WHERE id = 1"


async def read_version(db: Database) -> int:
    """The vault store's version: changes whenever anything ``/vaults`` shows may have."""
    return int(await db.fetchval("SELECT version FROM vaults_version WHERE id = 1") or 0)


async def read_versions(db: Database) -> tuple[int, int]:
    """The vault store's and the ratings store's versions, in one statement (E5 shows the
    depeg ratings of a vault's underlyings, so its bodies depend on both)."""
    row = await db.fetchrow("SELECT (SELECT version FROM vaults_version WHERE id = 1) AS v,"
                            " (SELECT version FROM ratings_version WHERE id = 1) AS r")
    return (int(row["v"] or 0), int(row["r"] or 0)) if row else (0, 0)


class VaultStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def migrate(self) -> int:
        return await migrate(self.db, COMPONENT, MIGRATIONS)

    async def write_batch(self, facts: Sequence[FactsUpdate[U]], fold: Fold[U],
                          ratings: Sequence[RatingRow]) -> VaultWriteStats:
        """One transaction: fold the facts updates onto the stored facts, then ratings."""
        stats = VaultWriteStats(len(facts), 0, len(ratings))
        per_vault: dict[tuple[str, str], list[FactsUpdate[U]]] = {}
        for f in facts:  # arrival order kept within each vault
            per_vault.setdefault((f.chain, f.vault), []).append(f)
        async with self.db.transaction() as tx:
            await tx.execute(BUMP_VERSION)
            rows: list[tuple[Any, ...]] = []
            docs: list[tuple[Any, ...]] = []
            for (chain, vault), updates in per_vault.items():
                row = await tx.fetchrow(
                    "SELECT v.facts_ts, d.facts FROM vaults v JOIN vault_documents d"
                    " ON d.chain = v.chain AND d.vault = v.vault"
                    " WHERE v.chain = $1 AND v.vault = $2", chain, vault)
                stored = msgspec.json.decode(row["facts"]) if row and row["facts"] else None
                ts = max(u.ts for u in updates)
                if row and row["facts_ts"] is not None:
                    ts = max(ts, float(row["facts_ts"]))
                state = fold(stored, [u.update for u in updates])
                rows.append((chain, vault, ts, *facts_columns(state)))
                docs.append((chain, vault, msgspec.json.encode(state).decode()))
            if rows:
                await tx.executemany(_UPSERT_FACTS, rows)
                await tx.executemany(_UPSERT_FACTS_DOC, docs)
            stats.vaults_touched = len(rows)
            if ratings:
                ordered = sorted(ratings, key=lambda r: r.ts)  # stable: arrival order on ties
                await tx.executemany(_UPSERT_HISTORY, [
                    (r.chain, r.vault, r.ts, r.rating, r.tier, r.verdict, tags_column(r.tags),
                     int(r.attention_needed)) for r in ordered])
                latest: dict[tuple[str, str], RatingRow] = {}
                for r in ordered:
                    latest[(r.chain, r.vault)] = r
                await tx.executemany(_UPSERT_RATING, [
                    (r.chain, r.vault, r.ts, r.rating, r.tier, r.verdict,
                     int(r.attention_needed), tags_column(r.tags)) for r in latest.values()])
                await tx.executemany(_UPSERT_RATING_DOC, [
                    (r.chain, r.vault, r.ts, r.record.decode()) for r in latest.values()])
        return stats

    async def apply_retention(self, days: int = HISTORY_DAYS, now: float | None = None) -> int:
        """Delete history older than ``days``; the window ends at the newest stored record
        when that is older than the wall clock (a store filled from an old replay keeps
        its data), as the ratings store does."""
        newest = await self.db.fetchval("SELECT MAX(ts) FROM vault_rating_history")
        wall = time.time() if now is None else now
        cutoff = min(wall, float(newest) if newest is not None else wall) - days * 86400
        async with self.db.transaction() as tx:
            deleted = int(await tx.fetchval(
                "SELECT COUNT(*) FROM vault_rating_history WHERE ts < $1", cutoff))
            if deleted:  # (E5's window of a vault behind the newest record may lose points)
                await tx.execute("DELETE FROM vault_rating_history WHERE ts < $1", cutoff)
                await tx.execute(BUMP_VERSION)
        return deleted

    async def counts(self) -> list[tuple[str, str, int]]:
        """(tier, verdict, vaults) over the rated vaults, for the store writer's gauges."""
        rows = await self.db.fetch(
            "SELECT tier, verdict, COUNT(*) AS n FROM vaults WHERE tier IS NOT NULL"
            " GROUP BY tier, verdict")
        return [(r["tier"], r["verdict"], int(r["n"])) for r in rows]
