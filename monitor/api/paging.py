"""The two pagination modes of the list endpoints (``GET /rwa``, ``GET /vaults``): offset
(``page``, ``pageSize``) and keyset (``cursor``, ``limit``), never mixed. Reading them from
the query, and the ``pagination`` object of the answer; each resource keeps its own
cursor format and store query."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import params
from .errors import ApiError

PAGE_SIZE_DEFAULT, LIMIT_DEFAULT, PAGE_MAX = 50, 100, 500
MAX_PAGE = 1_000_000


@dataclass(frozen=True)
class Paging:
    mode: str  # "offset" or "cursor"
    size: int  # pageSize (offset mode) or limit (cursor mode)
    offset: int | None  # offset mode: the rows before this page; None in cursor mode
    cursor: str | None  # cursor mode: the previous page's nextCursor; None: the first page


def parse(query: Mapping[str, str]) -> Paging:
    cursor_mode = "cursor" in query or "limit" in query
    if cursor_mode and ("page" in query or "pageSize" in query):
        raise ApiError(400, "use either page/pageSize (offset mode) or cursor/limit",
                       parameter="cursor")
    if cursor_mode:
        limit = params.integer(query, "limit", LIMIT_DEFAULT, 1, PAGE_MAX)
        return Paging("cursor", limit, None, query.get("cursor") or None)
    page = params.integer(query, "page", 1, 1, MAX_PAGE)
    size = params.integer(query, "pageSize", PAGE_SIZE_DEFAULT, 1, PAGE_MAX)
    return Paging("offset", size, (page - 1) * size, None)


def pagination(mode: str, size: int, offset: int | None, total: int, more: bool,
               next_cursor: Callable[[], str | None]) -> dict[str, Any]:
    """The answer's ``pagination``; ``next_cursor`` is only asked for in cursor mode when
    there are more rows."""
    out: dict[str, Any] = {"mode": mode, "total": total, "hasMore": more}
    if mode == "cursor":
        out["limit"] = size
        out["nextCursor"] = next_cursor() if more else None
    else:
        out["page"] = (offset or 0) // size + 1
        out["pageSize"] = size
        out["totalPages"] = -(-total // size)
    return out
