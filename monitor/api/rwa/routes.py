"""Routes: ``GET /rwa`` (E6, the pegged-token list) and ``GET /rwa/{address}`` (E7).

Both read the ratings store that the store writer fills; neither touches Kafka. On start
the app migrates the ratings tables and loads the token registry file into them, so
registry fields can be filtered and sorted in SQL.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

import msgspec
from aiohttp import web

from ...chains import CHAINS, normalize_address
from ...records import Tier
from ...registry import TAGS, load_registry
from ...storage import Database
from ...storage import ratings_read as reads
from ...storage.db import Row
from ...storage.ratings import RatingsStore, read_version
from ...timefmt import format_ts
from .. import jsonbody, paging, params
from ..context import CONFIG, DB, TICKS, now
from ..errors import ApiError
from ..readcache import ReadCache, cached_response
from .openapi import OPENAPI_PATHS, OPENAPI_SCHEMAS
from .view import decode_snapshot, episode, flat_metrics, item, point, unrated_item

__all__ = ["OPENAPI_PATHS", "OPENAPI_SCHEMAS", "add_routes"]

TIERS = tuple(t.value for t in Tier)
SORTS = tuple(reads.SORT_EXPRESSIONS)
#: Default order per sort: riskiest, biggest, A-Z, furthest from peg, freshest first.
DEFAULT_ORDER = {"score": "desc", "market_cap_usd": "desc", "symbol": "asc",
                 "deviation": "desc", "updated_at": "desc"}
HOURS_DEFAULT, HOURS_MAX = 24, 720
MAX_POINTS, MAX_CHANGES, MAX_EPISODES = 20_000, 1_000, 100


def encode_cursor(sort: str, order: str, key: tuple[Any, str, str]) -> str:
    raw = msgspec.json.encode([sort, order, *key])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, sort: str, order: str) -> tuple[Any, str, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        c_sort, c_order, value, chain, address = jsonbody.decode(raw)
    except (binascii.Error, ValueError, TypeError):  # JsonError is a ValueError
        raise params.bad("cursor", "invalid cursor: pass nextCursor from a previous page"
                         ) from None
    if (c_sort, c_order) != (sort, order):
        raise params.bad("cursor", "cursor was made for another sort or order",
                         sort=c_sort, order=c_order)
    wanted: type | tuple[type, ...] = str if sort == "symbol" else (int, float)
    if not (isinstance(value, wanted) and not isinstance(value, bool)
            and isinstance(chain, str) and isinstance(address, str)):
        raise params.bad("cursor", "invalid cursor: pass nextCursor from a previous page")
    return value, chain, address


LIST_PARAMS = ("chain", "tier", "sort", "order", "page", "pageSize", "cursor", "limit", "q",
               "collapsedOnly", "minMcap", "tags")


def parse_list(query: Mapping[str, str]) -> tuple[reads.ListFilter, reads.PageRequest, str]:
    params.known(query, LIST_PARAMS)
    flt = reads.ListFilter(
        chain=params.enum(query, "chain", CHAINS),
        tier=params.enum(query, "tier", TIERS),
        q=params.text(query, "q", 100),
        collapsed_only=params.boolean(query, "collapsedOnly"),
        min_mcap=params.number(query, "minMcap"),
        tags=params.enum_list(query, "tags", TAGS),
    )
    sort = params.enum(query, "sort", SORTS, "score") or "score"
    order = params.enum(query, "order", ("asc", "desc"), DEFAULT_ORDER[sort]) or "desc"
    asked = paging.parse(query)
    after = decode_cursor(asked.cursor, sort, order) if asked.cursor else None
    return flt, reads.PageRequest(sort, order, asked.size, asked.offset, after), asked.mode


#: The app's cache of encoded bodies (monitor/api/readcache.py), made when the store is
#: prepared.
READ_CACHE = web.AppKey("rwa_read_cache", ReadCache[int])


async def list_rwa(request: web.Request) -> web.Response:
    return await cached_response(request, request.app[READ_CACHE], _list_body)


async def get_rwa(request: web.Request) -> web.Response:
    return await cached_response(request, request.app[READ_CACHE], _detail_body)


async def _list_body(request: web.Request) -> bytes:
    flt, page, mode = parse_list(request.rel_url.query)
    stale_after = request.app[CONFIG].model.stale_after_seconds
    result = await reads.list_tokens(request.app[DB], flt, page)
    wall = now(request)
    items = [item(r, decode_snapshot(r), stale_after, wall) for r in result.rows]
    pagination = paging.pagination(
        mode, page.limit, page.offset, result.total, result.more,
        lambda: encode_cursor(page.sort, page.order, result.last_key) if result.last_key else None)
    unrated, unrated_total = await reads.unrated_tokens(request.app[DB], flt)
    aggregates = {
        "total": result.total,
        "collapsed": result.collapsed,
        "byTier": {t: result.by_tier.get(t, 0) for t in TIERS},
        "byChain": {c: result.by_chain.get(c, 0) for c in CHAINS},
        "unrated": unrated_total,
    }
    return msgspec.json.encode({"items": items, "pagination": pagination,
                                "aggregates": aggregates, "sort": page.sort,
                                "order": page.order,
                                "unrated": [unrated_item(r) for r in unrated]})


async def _detail_body(request: web.Request) -> bytes:
    raw = request.match_info["address"]
    address = normalize_address(raw)
    if address is None:
        raise params.bad("address", "address must be 0x followed by 40 hex digits")
    query = request.rel_url.query
    params.known(query, ("chain", "hours"))
    chain = params.enum(query, "chain", CHAINS)
    hours = params.integer(query, "hours", HOURS_DEFAULT, 1, HOURS_MAX)
    db = request.app[DB]
    row = await rated_token(db, address, chain)
    snap = decode_snapshot(row)
    end = float(row["ts"])
    start = end - hours * 3600
    points = await reads.history(db, row["chain"], address, start, end, MAX_POINTS)
    changes = await reads.tier_changes(db, row["chain"], address, start, end, MAX_CHANGES)
    eps = await reads.episodes(db, row["chain"], address, MAX_EPISODES)
    body = item(row, snap, request.app[CONFIG].model.stale_after_seconds, now(request))
    body["snapshot"] = {
        "timestamp": snap.timestamp,
        "signals": [msgspec.structs.asdict(s) for s in snap.signals],
        "metrics": flat_metrics(snap, row, points, eps, len(changes)),
    }
    body["history"] = {"hours": hours, "from": format_ts(start), "to": format_ts(end),
                       "points": [point(p) for p in points],
                       "truncated": len(points) >= MAX_POINTS}
    body["tier_changes"] = [msgspec.json.decode(c["event"]) for c in changes]
    body["episodes"] = [episode(e, end) for e in eps]
    return msgspec.json.encode(body)


async def rated_token(db: Database, address: str, chain: str | None) -> Row:
    """The token's latest row: 404 when unrated, 400 naming the chains when the address is
    rated on several and ``chain`` was not given (E7 and E3 alike)."""
    rows = await reads.find_latest(db, address, chain)
    if not rows:
        raise ApiError(404, "unknown token", address=address, chain=chain)
    if len(rows) > 1:
        raise params.bad("chain", "the address is rated on several chains: pass chain",
                         allowed=[r["chain"] for r in rows])
    return rows[0]


async def _prepare_store(app: web.Application) -> None:
    """Ratings tables exist and hold the registry file's tokens before the first request."""
    store = RatingsStore(app[DB])
    await store.migrate()
    await store.sync_registry(load_registry(app[CONFIG].registry.path))
    db = app[DB]
    app[READ_CACHE] = ReadCache(lambda: read_version(db),
                                check_interval=app[CONFIG].api.ratings_check_seconds,
                                clock=app[TICKS])


def add_routes(app: web.Application) -> None:
    app.on_startup.append(_prepare_store)
    app.router.add_get("/rwa", list_rwa, allow_head=False)
    app.router.add_get("/rwa/{address}", get_rwa, allow_head=False)
