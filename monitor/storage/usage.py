"""Compute-unit usage per API key, read from the one ledger (``cu_ledger``).

Every charge is a ledger line ``(api_key_id, kind, ref, units, created_at)``: ``kind`` is
the endpoint (``E3``, ``E8``, ``E10`` ... ``E15``) or ``delivery``; ``ref`` is unique per
kind, so a delivery retried five times is still one line (it is charged when it is created,
keyed by its delivery id). Every query here takes the caller's key id: a key never sees
another key's usage.
"""

from __future__ import annotations

from dataclasses import dataclass

from .db import Database
from .webhooks import charge

__all__ = ["UsageStore", "UsageTotals", "charge"]

DAY = 86400


@dataclass(frozen=True)
class UsageTotals:
    total: int
    #: (group, units) in group order: a UTC day number (epoch days) or an endpoint kind.
    groups: list[tuple[int | str, int]]


class UsageStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def charge(self, api_key_id: str, kind: str, ref: str, now: float) -> None:
        await charge(self.db, api_key_id, kind, ref, now)

    async def totals(self, api_key_id: str, start: float, end: float,
                     group_by: str | None = None) -> UsageTotals:
        """Units charged to ``api_key_id`` with ``start <= created_at < end``."""
        return await usage_totals(self.db, api_key_id, start, end, group_by)


async def usage_totals(db: Database, api_key_id: str, start: float, end: float,
                       group_by: str | None) -> UsageTotals:
    where = " FROM cu_ledger WHERE api_key_id = $1 AND created_at >= $2 AND created_at < $3"
    args = (api_key_id, float(start), float(end))
    total = int(await db.fetchval("SELECT COALESCE(SUM(units), 0)" + where, *args) or 0)
    if group_by is None:
        return UsageTotals(total, [])
    if group_by == "endpoint":
        expr = "kind"
    elif group_by == "day":
        # Epoch day of the charge (UTC): truncation, which CAST does on SQLite but rounds
        # on PostgreSQL, hence FLOOR there.
        expr = (f"CAST(FLOOR(created_at / {DAY}) AS BIGINT)" if db.dialect == "postgresql"
                else f"CAST(created_at / {DAY} AS INTEGER)")
    else:
        raise ValueError(f"unknown grouping {group_by!r}")
    rows = await db.fetch(
        f"SELECT {expr} AS grp, SUM(units) AS units" + where + f" GROUP BY {expr} ORDER BY 1",
        *args)
    groups: list[tuple[int | str, int]] = [
        (str(r["grp"]) if group_by == "endpoint" else int(r["grp"]), int(r["units"]))
        for r in rows]
    return UsageTotals(total, groups)
