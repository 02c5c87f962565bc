"""Read interface of the vault store, shared by E4/E5 (``/vaults``) and E8 (``/v3/vaults``).

* :func:`list_vaults` - the filtered, sorted, paginated list with its aggregates;
* :func:`get_vault` - one vault (facts + latest rating) or None;
* :func:`rating_history` - its rating records over a time window;
* :func:`underlying_ratings` - the depeg monitor's latest rating of tokens (composition).

Only vaults with a rating record are listed ("rated vaults"; a record may say tier
``unknown``). Sorting is done by the database with a total order (sort key, chain, vault),
so offset pages and keyset (cursor) pages are disjoint and complete; vaults without a value
for the sort key (no TVL, unrated, ...) sort last in either direction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import msgspec

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

#: Sort value -> (SQL expression over ``vaults v``, direction, nullable).
SORTS: dict[str, tuple[str, str, bool]] = {
    "score_desc": ("v.rating", "desc", True),
    "score_asc": ("v.rating", "asc", True),
    "tvl_desc": ("v.tvl_usd", "desc", True),
    "tvl_asc": ("v.tvl_usd", "asc", True),
    "apy_desc": ("v.apy_pct", "desc", True),
    "looping_desc": ("v.looping_rate", "desc", True),
    # Vaults without a name sort by symbol, then address: never a NULL key.
    "name_asc": ("lower(COALESCE(v.name, v.symbol, v.vault))", "asc", False),
}
_COLUMNS = ("v.chain, v.vault, v.facts_ts, v.name, v.symbol, v.protocol, v.contract_type,"
            " v.underlying_symbol, v.underlying_address, v.underlying_risk, v.tvl_usd,"
            " v.apy_pct, v.looping_rate, v.rating_ts, v.rating, v.tier, v.verdict,"
            " v.attention_needed, v.tags")
_DOCS = " LEFT JOIN vault_documents d ON d.chain = p.chain AND d.vault = p.vault"
_RATED = "v.rating_ts IS NOT NULL"  # rating columns are written together


@dataclass(frozen=True)
class VaultFilter:
    """E4 filters; None / empty means "any". Text matches are case-insensitive."""

    chain: str | None = None
    tier: str | None = None
    protocol: str | None = None
    contract_type: str | None = None
    underlying: str | None = None  # underlying asset symbol, exact
    underlying_risk: str | None = None
    min_tvl: float | None = None  # vaults without a TVL are excluded
    min_score: float | None = None  # unrated vaults are excluded by either bound
    max_score: float | None = None
    attention_needed: bool | None = None  # True: only vaults needing attention
    risk_flags: tuple[str, ...] = ()
    risk_flags_mode: str = "any"  # "any" (OR) or "all" (AND)
    q: str | None = None  # substring of name, symbol or address


@dataclass(frozen=True)
class VaultPage:
    sort: str = "score_desc"
    limit: int = 50
    offset: int | None = 0  # None: keyset mode, continuing after ``after``
    after: tuple[Any, str, str] | None = None  # (sort value, chain, vault)


@dataclass(frozen=True)
class StoredVault:
    """One vault as stored: facts columns, the merged facts, the latest rating record."""

    chain: str
    vault: str
    name: str | None
    symbol: str | None
    protocol: str | None
    contract_type: str | None
    underlying_symbol: str | None
    underlying_address: str | None
    underlying_risk: str | None
    tvl_usd: float | None
    apy_pct: float | None
    looping_rate: float | None
    facts: dict[str, Any]
    facts_ts: float | None
    rating_ts: float
    rating: float | None
    tier: str
    verdict: str
    attention_needed: bool
    tags: tuple[str, ...]
    #: The vaults.ratings record as published (JSON text); :attr:`record` decodes it.
    record_json: str

    @cached_property
    def record(self) -> dict[str, Any]:
        """The published record as a JSON object (decoded on first use: a list page only
        passes the ``risk`` envelope through, see :func:`record_summary`)."""
        decoded: dict[str, Any] = msgspec.json.decode(self.record_json) if self.record_json \
            else {}
        return decoded


class RecordSummary(msgspec.Struct):
    """What a list item shows of the record: the envelope as raw JSON, passed through."""

    risk: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)  # empty: no envelope
    explanation: str | None = None


_summary_decoder = msgspec.json.Decoder(RecordSummary)


def record_summary(v: StoredVault) -> RecordSummary:
    """``risk`` and ``explanation`` of the vault's record without building the envelope."""
    return _summary_decoder.decode(v.record_json) if v.record_json else RecordSummary()


@dataclass
class VaultListResult:
    vaults: list[StoredVault]
    total: int
    by_tier: dict[str, int]
    by_chain: dict[str, int]
    by_protocol: dict[str, int]
    total_tvl_usd: float
    attention_needed: int
    more: bool = False
    last_key: tuple[Any, str, str] | None = field(default=None)


#: Filters the ``vaults_aggregates`` index does not cover (see :func:`_table`).
def _uncovered(f: VaultFilter) -> bool:
    return any(x is not None for x in (f.contract_type, f.underlying, f.underlying_risk,
                                       f.min_score, f.max_score, f.q)) or bool(f.risk_flags)


def _table(f: VaultFilter, dialect: str) -> str:
    """``vaults v``; on SQLite with a filter the aggregates index does not cover, a table
    scan is forced: the planner would walk that index for its group order and look up
    every row in the table (measured: 90 ms instead of 10 ms over 10,000 vaults)."""
    return "vaults v NOT INDEXED" if dialect == "sqlite" and _uncovered(f) else "vaults v"


def _where(f: VaultFilter, p: Params, dialect: str = "postgresql") -> str:
    clauses = [_RATED]
    for column, value in (("v.chain", f.chain), ("v.tier", f.tier),
                          ("v.protocol", f.protocol), ("v.contract_type", f.contract_type),
                          ("v.underlying_risk", f.underlying_risk)):
        if value is not None:
            clauses.append(f"{column} = {p(value)}")
    if f.underlying is not None:
        clauses.append(f"lower(v.underlying_symbol) = {p(f.underlying.lower())}")
    if f.min_tvl is not None:
        clauses.append(f"v.tvl_usd >= {p(f.min_tvl)}")
    if f.min_score is not None:
        clauses.append(f"v.rating >= {p(f.min_score)}")
    if f.max_score is not None:
        clauses.append(f"v.rating <= {p(f.max_score)}")
    if f.attention_needed is not None:
        clauses.append(f"v.attention_needed = {int(f.attention_needed)}")
    if f.risk_flags:
        glue = " AND " if f.risk_flags_mode == "all" else " OR "
        clauses.append("(" + glue.join(f"v.tags LIKE {p(f'%,{t},%')}"
                                       for t in f.risk_flags) + ")")
    if f.q:
        pattern = p(like_pattern(f.q))
        # SQLite's LIKE already ignores ASCII case (and its lower() knows only ASCII).
        low = "{}" if dialect == "sqlite" else "lower({})"
        clauses.append(f"({low.format('v.name')} LIKE {pattern} ESCAPE '\\'"
                       f" OR {low.format('v.symbol')} LIKE {pattern} ESCAPE '\\'"
                       f" OR v.vault LIKE {pattern} ESCAPE '\\')")
    return " WHERE " + " AND ".join(clauses)


def sort_expression(sort: str, dialect: str) -> str:
    expr, direction, nullable = SORTS[sort]
    if nullable:
        expr = nulls_last(expr, direction == "asc")
    return byte_order(expr, dialect) if sort == "name_asc" else expr


def _vault(row: Row) -> StoredVault:
    tags = tuple(t for t in (row["tags"] or "").split(",") if t)
    return StoredVault(
        chain=row["chain"], vault=row["vault"], name=row["name"], symbol=row["symbol"],
        protocol=row["protocol"], contract_type=row["contract_type"],
        underlying_symbol=row["underlying_symbol"],
        underlying_address=row["underlying_address"], underlying_risk=row["underlying_risk"],
        tvl_usd=row["tvl_usd"], apy_pct=row["apy_pct"], looping_rate=row["looping_rate"],
        facts=msgspec.json.decode(row["facts"]) if row["facts"] else {},
        facts_ts=row["facts_ts"], rating_ts=float(row["rating_ts"]), rating=row["rating"],
        tier=row["tier"], verdict=row["verdict"],
        attention_needed=bool(row["attention_needed"]), tags=tags,
        record_json=row["record"] or "")


async def list_vaults(db: Database, f: VaultFilter, page: VaultPage,
                      with_facts: bool = False) -> VaultListResult:
    """One page and the aggregates over every vault matching ``f``. The merged facts are
    read only ``with_facts`` (E4 items do not show them); otherwise ``facts`` is empty."""
    p = Params()
    where = _where(f, p, db.dialect)
    groups = await db.fetch(
        "SELECT v.tier AS tier, v.chain AS chain, v.protocol AS protocol, COUNT(*) AS n,"
        " SUM(v.tvl_usd) AS tvl, SUM(v.attention_needed) AS attention"
        f" FROM {_table(f, db.dialect)}{where} GROUP BY v.tier, v.chain, v.protocol",
        *p.values)
    by_tier: dict[str, int] = {}
    by_chain: dict[str, int] = {}
    by_protocol: dict[str, int] = {}
    tvl, attention = 0.0, 0
    for g in groups:
        n = int(g["n"])
        by_tier[g["tier"]] = by_tier.get(g["tier"], 0) + n
        by_chain[g["chain"]] = by_chain.get(g["chain"], 0) + n
        protocol = g["protocol"] or "unknown"
        by_protocol[protocol] = by_protocol.get(protocol, 0) + n
        tvl += float(g["tvl"] or 0.0)
        attention += int(g["attention"] or 0)

    key = sort_expression(page.sort, db.dialect)
    ascending = SORTS[page.sort][1] == "asc"
    # The page is chosen on the narrow table; only its rows fetch their documents.
    after, tail = keyset_page(p, key, ascending, "v.chain", "v.vault", page.after, page.limit,
                              page.offset)
    inner = f"SELECT {_COLUMNS}, {key} AS sort_key FROM vaults v{where}"
    if after:
        inner += " AND " + after  # ``where`` is never empty: it keeps rated vaults only
    facts = "d.facts" if with_facts else "NULL AS facts"
    order = "ASC" if ascending else "DESC"
    sql = (f"SELECT p.*, {facts}, d.record FROM ({inner}{tail}) p{_DOCS}"
           f" ORDER BY p.sort_key {order}, p.chain {order}, p.vault {order}")
    rows, more, last_key = split_page(await db.fetch(sql, *p.values), page.limit, "vault")
    return VaultListResult(
        [_vault(r) for r in rows], sum(by_tier.values()), by_tier, by_chain, by_protocol,
        tvl, attention, more, last_key)


async def get_vault(db: Database, chain: str, vault: str) -> StoredVault | None:
    """The rated vault ``chain``/``vault`` (lowercase address), or None."""
    row = await db.fetchrow(
        f"SELECT p.*, d.facts, d.record FROM (SELECT {_COLUMNS} FROM vaults v"
        f" WHERE v.chain = $1 AND v.vault = $2 AND {_RATED}) p{_DOCS}", chain, vault)
    return _vault(row) if row else None


@dataclass(frozen=True)
class HistoryPoint:
    ts: float
    rating: float | None
    tier: str
    verdict: str
    tags: tuple[str, ...]
    attention_needed: bool


async def rating_history(db: Database, chain: str, vault: str, start: float, end: float,
                         cap: int) -> list[HistoryPoint]:
    """The newest ``cap`` rating records of the window [start, end], oldest first."""
    rows = await newest_in_window(
        db, "ts, rating, tier, verdict, tags, attention_needed", "vault_rating_history",
        "vault", chain, vault, start, end, cap)
    return [HistoryPoint(float(r["ts"]), r["rating"], r["tier"], r["verdict"],
                         tuple(t for t in r["tags"].split(",") if t),
                         bool(r["attention_needed"])) for r in rows]


async def underlying_ratings(db: Database, chain: str,
                             addresses: Sequence[str]) -> dict[str, Row]:
    """The depeg monitor's latest rating (``rating``, ``tier``, ``ts``) of each token
    address on ``chain`` that it rates; tokens it does not rate are absent."""
    wanted = sorted({a.lower() for a in addresses})
    if not wanted:
        return {}
    marks = ", ".join(f"${i + 2}" for i in range(len(wanted)))
    rows = await db.fetch(
        "SELECT token_address, symbol, rating, tier, ts FROM rating_latest"
        f" WHERE chain = $1 AND token_address IN ({marks})", chain, *wanted)
    return {r["token_address"]: r for r in rows}
