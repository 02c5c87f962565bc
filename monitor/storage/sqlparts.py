"""Small pieces the read queries share: numbered parameters, LIKE patterns, keyset pages
and history windows.

A list query orders by a total order (sort key, chain, address) so offset pages and keyset
(cursor) pages are disjoint and complete; the helpers below write that order once.
"""

from __future__ import annotations

from typing import Any

from .db import Database, Row

#: Stands in for a missing sort value, past every real one in the sort's direction.
_BIG = 1e300

#: Where a keyset page continues: (sort value, chain, address) of the previous page's last row.
PageKey = tuple[Any, str, str]


class Params:
    """Collects query arguments; calling it with a value returns its ``$n`` marker."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def __call__(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"


def like_pattern(text: str) -> str:
    """``%text%`` in lowercase with LIKE's wildcards escaped (use ``ESCAPE '\\'``)."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def nulls_last(expr: str, ascending: bool) -> str:
    """``expr`` with NULL replaced by a value that sorts last in either direction (the keyset
    comparison needs a value, and both databases would otherwise place NULL differently)."""
    return f"COALESCE({expr}, {_BIG if ascending else -_BIG})"


def byte_order(expr: str, dialect: str) -> str:
    """Text compared byte by byte on PostgreSQL, as SQLite's BINARY collation does."""
    return f'({expr} COLLATE "C")' if dialect == "postgresql" else expr


def keyset_page(p: Params, key: str, ascending: bool, chain: str, address: str,
                after: PageKey | None, limit: int, offset: int | None) -> tuple[str, str]:
    """``(condition, tail)`` of a page in the order (``key``, ``chain``, ``address``).

    The condition (empty without ``after``) keeps the rows past ``after``; the tail orders
    them and asks for ``limit + 1`` rows, so :func:`split_page` can tell whether more follow.
    """
    cmp, direction = (">", "ASC") if ascending else ("<", "DESC")
    condition = ""
    if after is not None:
        value, after_chain, after_address = after
        v, c, a = p(value), p(after_chain), p(after_address)
        condition = (f"({key} {cmp} {v} OR ({key} = {v} AND ({chain} {cmp} {c}"
                     f" OR ({chain} = {c} AND {address} {cmp} {a}))))")
    tail = f" ORDER BY sort_key {direction}, {chain} {direction}, {address} {direction}"
    tail += f" LIMIT {p(limit + 1)}"
    if offset is not None:
        tail += f" OFFSET {p(offset)}"
    return condition, tail


def split_page(rows: list[Row], limit: int,
               address: str) -> tuple[list[Row], bool, PageKey | None]:
    """The page of a :func:`keyset_page` query, whether more rows follow, and the key of its
    last row (column ``sort_key``, ``chain`` and ``address``) for the next cursor."""
    more = len(rows) > limit
    rows = rows[:limit]
    last = rows[-1] if rows else None
    return rows, more, (last["sort_key"], last["chain"], last[address]) if last else None


async def newest_in_window(db: Database, columns: str, table: str, key_column: str,
                           chain: str, key: str, start: float, end: float,
                           cap: int) -> list[Row]:
    """The newest ``cap`` rows of one chain and key's history with ``start <= ts <= end``,
    oldest first: a window longer than ``cap`` points keeps its recent end."""
    rows = await db.fetch(
        f"SELECT {columns} FROM {table}"
        f" WHERE chain = $1 AND {key_column} = $2 AND ts >= $3 AND ts <= $4"
        " ORDER BY ts DESC LIMIT $5", chain, key, start, end, cap)
    rows.reverse()
    return rows
