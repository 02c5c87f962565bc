"""Read queries of the ratings store: the filtered, sorted, paginated list and one token.

Sorting is done by the database with a total order (sort key, chain, address), so offset
pages and keyset (cursor) pages are disjoint and complete. Missing values (no market cap,
no deviation) sort last in both directions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .db import Database, Row
from .sqlparts import (
    Params,
    byte_order,
    keyset_page,
    like_pattern,
    newest_in_window,
    nulls_last,
    split_page,
)

#: Sort name -> SQL expression over ``rating_latest l`` joined with ``token_registry r``.
SORT_EXPRESSIONS = {
    "score": "l.rating",
    "market_cap_usd": "r.market_cap_usd",
    "symbol": "lower(COALESCE(r.symbol, l.symbol))",
    "deviation": "l.abs_deviation_pct",
    "updated_at": "l.ts",
}
_NULLABLE = {"market_cap_usd", "deviation"}

_FROM = (" FROM rating_latest l LEFT JOIN token_registry r"
         " ON r.chain = l.chain AND r.token_address = l.token_address")

_COLUMNS = (
    "l.chain, l.token_address, l.symbol AS snap_symbol, l.ts, l.rating, l.tier, l.tier_since,"
    " l.collapsed, l.snapshot, l.received_at, r.symbol AS reg_symbol, r.name, r.peg_type,"
    " r.peg_reference, r.market_cap_usd, (SELECT MIN(e.started_at) FROM depeg_episodes e"
    " WHERE e.chain = l.chain AND e.token_address = l.token_address"
    " AND e.recovered_at IS NULL) AS episode_started"
)


@dataclass(frozen=True)
class ListFilter:
    chain: str | None = None
    tier: str | None = None
    q: str | None = None
    collapsed_only: bool = False
    min_mcap: float | None = None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class PageRequest:
    sort: str = "score"
    order: str = "desc"
    limit: int = 50
    offset: int | None = 0  # None: keyset mode
    after: tuple[Any, str, str] | None = None  # (sort value, chain, address)


@dataclass
class ListResult:
    rows: list[Row]
    total: int
    by_tier: dict[str, int]
    by_chain: dict[str, int]
    collapsed: int
    more: bool = False
    last_key: tuple[Any, str, str] | None = field(default=None)


def _where(f: ListFilter, p: Params) -> str:
    clauses: list[str] = []
    if f.chain:
        clauses.append(f"l.chain = {p(f.chain)}")
    if f.tier:
        clauses.append(f"l.tier = {p(f.tier)}")
    if f.collapsed_only:
        clauses.append("l.collapsed = 1")
    if f.min_mcap is not None:
        clauses.append(f"r.market_cap_usd >= {p(f.min_mcap)}")
    if f.q:
        pattern = p(like_pattern(f.q))
        clauses.append(
            f"(lower(COALESCE(r.symbol, l.symbol)) LIKE {pattern} ESCAPE '\\'"
            f" OR lower(COALESCE(r.name, '')) LIKE {pattern} ESCAPE '\\'"
            f" OR l.token_address LIKE {pattern} ESCAPE '\\')")
    if f.tags:
        any_of = []
        for tag in f.tags:
            if tag == "unregistered":
                any_of.append("r.chain IS NULL")
            else:
                any_of.append(f"r.tags LIKE {p(f'%,{tag},%')}")
        clauses.append("(" + " OR ".join(any_of) + ")")
    return (" WHERE " + " AND ".join(clauses)) if clauses else ""


def sort_expression(sort: str, order: str, dialect: str) -> str:
    expr = SORT_EXPRESSIONS[sort]
    if sort in _NULLABLE:
        expr = nulls_last(expr, order == "asc")
    return byte_order(expr, dialect) if sort == "symbol" else expr


async def list_tokens(db: Database, f: ListFilter, page: PageRequest) -> ListResult:
    p = Params()
    where = _where(f, p)
    filter_args = list(p.values)
    by_tier = {r["k"]: int(r["n"]) for r in await db.fetch(
        f"SELECT l.tier AS k, COUNT(*) AS n{_FROM}{where} GROUP BY l.tier", *filter_args)}
    chains = await db.fetch(
        f"SELECT l.chain AS k, COUNT(*) AS n, SUM(l.collapsed) AS c{_FROM}{where}"
        " GROUP BY l.chain", *filter_args)
    by_chain = {r["k"]: int(r["n"]) for r in chains}
    collapsed = sum(int(r["c"] or 0) for r in chains)

    key = sort_expression(page.sort, page.order, db.dialect)
    after, tail = keyset_page(p, key, page.order == "asc", "l.chain", "l.token_address",
                              page.after, page.limit, page.offset)
    sql = f"SELECT {_COLUMNS}, {key} AS sort_key{_FROM}{where}"
    if after:
        sql += (" AND " if where else " WHERE ") + after
    rows, more, last_key = split_page(await db.fetch(sql + tail, *p.values), page.limit,
                                      "token_address")
    return ListResult(rows, sum(by_tier.values()), by_tier, by_chain, collapsed, more,
                      last_key)


async def find_latest(db: Database, address: str, chain: str | None) -> list[Row]:
    sql = f"SELECT {_COLUMNS}{_FROM} WHERE l.token_address = $1"
    args: list[Any] = [address]
    if chain:
        sql += " AND l.chain = $2"
        args.append(chain)
    return await db.fetch(sql + " ORDER BY l.chain", *args)


async def history(db: Database, chain: str, address: str, start: float, end: float,
                  cap: int) -> list[Row]:
    """The newest ``cap`` points of the window, oldest first."""
    return await newest_in_window(
        db, "ts, rating, tier, deviation_pct, price_usd, peg_usd", "rating_history",
        "token_address", chain, address, start, end, cap)


async def tier_changes(db: Database, chain: str, address: str, start: float, end: float,
                       cap: int) -> list[Row]:
    return await db.fetch(
        "SELECT event, ts FROM tier_changes WHERE chain = $1 AND token_address = $2"
        " AND ts >= $3 AND ts <= $4 ORDER BY ts, event_id LIMIT $5",
        chain, address, start, end, cap)


async def episodes(db: Database, chain: str, address: str, cap: int) -> list[Row]:
    return await db.fetch(
        "SELECT started_at, start_event_id, started_tier, worst_tier, peak_deviation_pct,"
        " peak_at, peak_price_usd, peak_rating, recovered_at, recovery_event_id"
        " FROM depeg_episodes WHERE chain = $1 AND token_address = $2"
        " ORDER BY started_at DESC LIMIT $3", chain, address, cap)


#: Registered tokens with no rating yet (no price with a peg received): listed apart.
UNRATED_LIMIT = 500


async def unrated_tokens(db: Database, f: ListFilter) -> tuple[list[Row], int]:
    """Registered tokens with no rating, filtered like the list (chain, minMcap, q, tags);
    none when the filter asks for a tier or collapsed tokens, which they have not."""
    if f.tier or f.collapsed_only or "unregistered" in f.tags:
        return [], 0
    p = Params()
    clauses = ["NOT EXISTS (SELECT 1 FROM rating_latest l WHERE l.chain = r.chain"
               " AND l.token_address = r.token_address)"]
    if f.chain:
        clauses.append(f"r.chain = {p(f.chain)}")
    if f.min_mcap is not None:
        clauses.append(f"r.market_cap_usd >= {p(f.min_mcap)}")
    if f.q:
        pattern = p(like_pattern(f.q))
        clauses.append(f"(lower(r.symbol) LIKE {pattern} ESCAPE '\\'"
                       f" OR lower(r.name) LIKE {pattern} ESCAPE '\\'"
                       f" OR r.token_address LIKE {pattern} ESCAPE '\\')")
    if f.tags:
        clauses.append("(" + " OR ".join(f"r.tags LIKE {p(f'%,{tag},%')}"
                                         for tag in f.tags) + ")")
    where = " WHERE " + " AND ".join(clauses)
    count = await db.fetch(f"SELECT COUNT(*) AS n FROM token_registry r{where}", *p.values)
    rows = await db.fetch(
        "SELECT r.chain, r.token_address, r.symbol, r.name, r.peg_type, r.peg_reference,"
        f" r.market_cap_usd FROM token_registry r{where}"
        f" ORDER BY r.chain, r.token_address LIMIT {p(UNRATED_LIMIT)}", *p.values)
    return rows, int(count[0]["n"])
