"""The ratings store: latest snapshot per token, rating history, tier changes, episodes.

Writes come in batches from the store writer (one transaction per batch) and are
idempotent: history rows are keyed by token + timestamp, tier changes by ``event_id``, the
latest row only moves forward in event time, and episodes are rebuilt from the stored tier
changes, so replaying a topic from any offset leaves the same rows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..records import RatingSnapshot, TierChangeEvent, encode
from ..registry import TokenInfo
from ..timefmt import parse_ts
from .db import Database, Executor, migrate
from .episodes import BY_SEVERITY, TierChange, build_episodes, severity
from .ratings_schema import COMPONENT, MIGRATIONS

#: A token critical for this long (event time) counts as collapsed (``collapsedOnly``).
COLLAPSE_AFTER_SECONDS = 7 * 86400
#: ... and so does a critical token trading below this fraction of its peg.
COLLAPSE_PRICE_RATIO = 0.5
_OPEN_END = 1e300  # "not recovered yet" as a bound both databases compare as a double

_UPSERT_LATEST = f"""
INSERT INTO rating_latest (chain, token_address, symbol, ts, rating, tier, severity,
  price_ratio, abs_deviation_pct, tier_since, collapsed, snapshot, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (chain, token_address) DO UPDATE SET
  symbol = excluded.symbol, ts = excluded.ts, rating = excluded.rating,
  tier = excluded.tier, severity = excluded.severity, price_ratio = excluded.price_ratio,
  abs_deviation_pct = excluded.abs_deviation_pct,
  tier_since = CASE WHEN excluded.tier = rating_latest.tier
                    THEN rating_latest.tier_since ELSE excluded.ts END,
  collapsed = CASE WHEN excluded.tier = 'critical' AND (excluded.collapsed = 1 OR (
                    rating_latest.tier = 'critical'
                    AND rating_latest.tier_since <= excluded.ts - {COLLAPSE_AFTER_SECONDS}))
                   THEN 1 ELSE 0 END,
  snapshot = excluded.snapshot, received_at = excluded.received_at
WHERE excluded.ts >= rating_latest.ts
"""

_UPSERT_HISTORY = """
INSERT INTO rating_history (chain, token_address, ts, rating, tier, severity, deviation_pct,
  price_usd, peg_usd)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (chain, token_address, ts) DO UPDATE SET
  rating = excluded.rating, tier = excluded.tier, severity = excluded.severity,
  deviation_pct = excluded.deviation_pct, price_usd = excluded.price_usd,
  peg_usd = excluded.peg_usd
"""

_INSERT_CHANGE = """
INSERT INTO tier_changes (event_id, chain, token_address, ts, old_tier, new_tier, event)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (event_id) DO NOTHING
"""

_INSERT_EPISODE = """
INSERT INTO depeg_episodes (chain, token_address, started_at, start_event_id, started_tier,
  worst_tier, recovered_at, recovery_event_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
"""


@dataclass
class WriteStats:
    snapshots: int = 0
    events: int = 0
    episodes_rebuilt: int = 0


def _price_ratio(s: RatingSnapshot) -> float | None:
    try:
        price, peg = float(s.price_usd or "nan"), float(s.peg_usd or "nan")
    except ValueError:
        return None
    ratio = price / peg if peg > 0 else math.nan
    return ratio if math.isfinite(ratio) else None


def _latest_row(s: RatingSnapshot, ts: float, received_at: float) -> tuple[Any, ...]:
    ratio = _price_ratio(s)
    collapsed = int(s.tier == "critical" and ratio is not None and ratio < COLLAPSE_PRICE_RATIO)
    abs_dev = abs(s.deviation_pct) if s.deviation_pct is not None else None
    return (s.chain, s.token_address.lower(), s.symbol, ts, s.rating, s.tier,
            severity(s.tier), ratio, abs_dev, ts, collapsed, encode(s).decode(), received_at)


#: In every write transaction: readers' caches key on this (monitor/api/readcache.py).
BUMP_VERSION = "UPDATE ratings_version SET version = version + 1 WHERE id = 1"


async def read_version(db: Database) -> int:
    """The ratings version: changes whenever anything the read API shows may have."""
    return int(await db.fetchval("SELECT version FROM ratings_version WHERE id = 1") or 0)


class RatingsStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def migrate(self) -> int:
        return await migrate(self.db, COMPONENT, MIGRATIONS)

    async def write_batch(self, snapshots: Sequence[RatingSnapshot],
                          events: Sequence[TierChangeEvent], *,
                          received_at: float | None = None) -> WriteStats:
        """One transaction: history, latest rows, tier changes, then the episodes touched.

        ``received_at`` (default: now) is when these ratings reached the store; the API
        calls a rating stale once nothing has refreshed it for ``stale_after_seconds``."""
        received = time.time() if received_at is None else received_at
        snaps = sorted(((parse_ts(s.timestamp), s) for s in snapshots),
                       key=lambda p: (p[1].chain, p[1].token_address.lower(), p[0]))
        history = [(s.chain, s.token_address.lower(), ts, s.rating, s.tier, severity(s.tier),
                    s.deviation_pct, s.price_usd, s.peg_usd) for ts, s in snaps]
        # Only rows that change the tier (and each token's last) need to pass through the
        # latest-row upsert for ``tier_since`` to be right; the rest would be overwritten.
        latest: list[tuple[Any, ...]] = []
        for i, (ts, s) in enumerate(snaps):
            nxt = snaps[i + 1][1] if i + 1 < len(snaps) else None
            prev = snaps[i - 1][1] if i else None
            same_token = nxt is not None and (nxt.chain, nxt.token_address.lower()) == (
                s.chain, s.token_address.lower())
            tier_moved = prev is None or prev.tier != s.tier or (
                prev.chain, prev.token_address.lower()) != (s.chain, s.token_address.lower())
            if not same_token or tier_moved:
                latest.append(_latest_row(s, ts, received))
        changes = [(e.event_id, e.data.chain, e.data.token_address.lower(),
                    parse_ts(e.timestamp), e.data.old_tier, e.data.new_tier, encode(e).decode())
                   for e in events]
        stats = WriteStats(len(history), len(changes))
        async with self.db.transaction() as tx:
            if history:
                await tx.executemany(_UPSERT_HISTORY, history)
                await tx.executemany(_UPSERT_LATEST, latest)
            if changes:
                await tx.executemany(_INSERT_CHANGE, changes)
            stats.episodes_rebuilt = await self._update_episodes(tx, history, changes)
            await tx.execute(BUMP_VERSION)
        return stats

    async def _update_episodes(self, tx: Executor, history: list[tuple[Any, ...]],
                               changes: list[tuple[Any, ...]]) -> int:
        first_change: dict[tuple[str, str], float] = {}
        for c in changes:
            key = (c[1], c[2])
            first_change[key] = min(first_change.get(key, c[3]), c[3])
        touched: set[tuple[str, str, float, float | None]] = set()
        for (chain, token), since in first_change.items():
            for ep in await self._rebuild(tx, chain, token, since):
                touched.add((chain, token, ep[0], ep[1]))
        if history:
            span: dict[tuple[str, str], tuple[float, float]] = {}
            for h in history:
                lo, hi = span.get((h[0], h[1]), (h[2], h[2]))
                span[(h[0], h[1])] = (min(lo, h[2]), max(hi, h[2]))
            low = min(lo for lo, _ in span.values())
            rows = await tx.fetch(
                "SELECT chain, token_address, started_at, recovered_at FROM depeg_episodes"
                " WHERE recovered_at IS NULL OR recovered_at >= $1", low)
            for r in rows:
                rng = span.get((r["chain"], r["token_address"]))
                end = r["recovered_at"]
                if rng and r["started_at"] <= rng[1] and (end is None or end >= rng[0]):
                    touched.add((r["chain"], r["token_address"], r["started_at"], end))
        for chain, token, started, recovered in touched:
            await self._refresh_episode(tx, chain, token, started, recovered)
        return len(touched)

    async def _rebuild(self, tx: Executor, chain: str, token: str,
                       since: float) -> list[tuple[float, float | None]]:
        """Rebuild the token's episodes from the first one that ``since`` can affect."""
        anchor = await tx.fetchval(
            "SELECT started_at FROM depeg_episodes WHERE chain = $1 AND token_address = $2"
            " AND started_at <= $3 AND (recovered_at IS NULL OR recovered_at >= $3)"
            " ORDER BY started_at DESC LIMIT 1", chain, token, since)
        anchor = since if anchor is None else float(anchor)
        await tx.execute("DELETE FROM depeg_episodes WHERE chain = $1 AND token_address = $2"
                         " AND started_at >= $3", chain, token, anchor)
        rows = await tx.fetch(
            "SELECT event_id, ts, old_tier, new_tier FROM tier_changes WHERE chain = $1"
            " AND token_address = $2 AND ts >= $3 ORDER BY ts, event_id", chain, token, anchor)
        episodes = build_episodes(TierChange(r["event_id"], r["ts"], r["old_tier"],
                                             r["new_tier"]) for r in rows)
        if episodes:
            await tx.executemany(_INSERT_EPISODE, [
                (chain, token, e.started_at, e.start_event_id, e.started_tier, e.worst_tier,
                 e.recovered_at, e.recovery_event_id) for e in episodes])
        return [(e.started_at, e.recovered_at) for e in episodes]

    async def _refresh_episode(self, tx: Executor, chain: str, token: str, started: float,
                               recovered: float | None) -> None:
        """Peak deviation, peak rating and worst tier over the episode's span."""
        end = _OPEN_END if recovered is None else recovered
        args = (chain, token, started, end)
        where = "chain = $1 AND token_address = $2 AND ts >= $3 AND ts < $4"
        agg = await tx.fetchrow(
            f"SELECT MAX(severity) AS sev, MAX(rating) AS rating FROM rating_history"
            f" WHERE {where}", *args)
        peak = await tx.fetchrow(
            f"SELECT ts, deviation_pct, price_usd FROM rating_history WHERE {where}"
            " AND deviation_pct IS NOT NULL ORDER BY abs(deviation_pct) DESC, ts LIMIT 1", *args)
        tiers = await tx.fetch(f"SELECT DISTINCT new_tier FROM tier_changes WHERE {where}", *args)
        levels = [severity(t["new_tier"]) for t in tiers]
        worst = max([*levels, int(agg["sev"] or 0) if agg else 0])
        await tx.execute(
            "UPDATE depeg_episodes SET worst_tier = COALESCE($4, worst_tier),"
            " peak_deviation_pct = $5, peak_at = $6, peak_price_usd = $7, peak_rating = $8"
            " WHERE chain = $1 AND token_address = $2 AND started_at = $3",
            chain, token, started, BY_SEVERITY.get(worst),
            peak["deviation_pct"] if peak else None, peak["ts"] if peak else None,
            peak["price_usd"] if peak else None, agg["rating"] if agg else None)

    async def apply_retention(self, retention_days: int, now: float | None = None) -> int:
        """Delete history, tier changes and closed episodes older than the window.

        The window ends at the newest stored snapshot when that is older than the wall
        clock, so a store filled from an old replay keeps its data. Tier changes of a
        still-open episode are kept (the episode is rebuilt from them).
        """
        newest = await self.db.fetchval("SELECT MAX(ts) FROM rating_history")
        wall = time.time() if now is None else now
        cutoff = min(wall, float(newest) if newest is not None else wall)
        cutoff -= retention_days * 86400
        statements = [
            ("rating_history", "ts < $1"),
            ("depeg_episodes", "recovered_at IS NOT NULL AND recovered_at < $1"),
            ("tier_changes",
             "ts < $1 AND NOT EXISTS (SELECT 1 FROM depeg_episodes e WHERE e.chain ="
             " tier_changes.chain AND e.token_address = tier_changes.token_address"
             " AND e.recovered_at IS NULL AND tier_changes.ts >= e.started_at)"),
        ]
        deleted = 0
        async with self.db.transaction() as tx:
            for table, where in statements:  # counted by the same indexed predicate
                deleted += int(await tx.fetchval(
                    f"SELECT COUNT(*) FROM {table} WHERE {where}", cutoff))
                await tx.execute(f"DELETE FROM {table} WHERE {where}", cutoff)
            await tx.execute(BUMP_VERSION)
        return deleted

    async def sync_registry(self, tokens: Sequence[TokenInfo]) -> None:
        """Replace the registry table with the file's tokens (the file is the truth).

        Upserts, so API replicas starting together on one database do not collide."""
        rows = [(t.chain, t.address, t.symbol, t.name, t.peg_type, t.peg_reference,
                 t.market_cap_usd, "," + ",".join(t.tags) + ",") for t in tokens]
        async with self.db.transaction() as tx:
            await tx.execute("DELETE FROM token_registry")
            if rows:
                await tx.executemany(
                    "INSERT INTO token_registry (chain, token_address, symbol, name, peg_type,"
                    " peg_reference, market_cap_usd, tags) VALUES ($1, $2, $3, $4, $5, $6, $7,"
                    " $8) ON CONFLICT (chain, token_address) DO UPDATE SET"
                    " symbol = excluded.symbol, name = excluded.name,"
                    " peg_type = excluded.peg_type, peg_reference = excluded.peg_reference,"
                    " market_cap_usd = excluded.market_cap_usd, tags = excluded.tags", rows)
            await tx.execute(BUMP_VERSION)

