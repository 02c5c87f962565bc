"""Handlers: ``GET /vaults`` (E4, the vault list) and ``GET /vaults/{address}`` (E5).

Both read the vault store that the store writer fills (:mod:`monitor.storage.vaults_read`);
neither touches Kafka. The depeg ratings of a vault's underlyings (E5 composition) come
from the ratings store, so E5 shows the same tier ``/rwa`` shows for the token.

Neither body reads the wall clock: each is a function of its path and query and of the
stores, so both are served from a read cache (:mod:`monitor.api.readcache`) while the
store's version is unchanged: E4 keyed on the vault store's version, E5 on the vault
and the ratings stores' together. A write shows within twice
``api.ratings_check_seconds``, as for ``/rwa``.
"""

from __future__ import annotations

import math

import msgspec
from aiohttp import web

from ...chains import normalize_address
from ...storage import vaults_read as reads
from ...storage.ratings import RatingsStore
from ...storage.vaults import HISTORY_DAYS, VaultStore, read_version, read_versions
from .. import paging, params
from ..context import CONFIG, DB, TICKS
from ..cursor import encode_cursor
from ..errors import ApiError
from ..readcache import ReadCache, cached_response
from .catalogue import VAULT_CHAINS, VAULT_TIERS
from .request import parse_list
from .view import composition_entries, detail, item

#: History points returned at most (a vault re-rated every minute for 90 days fits).
MAX_HISTORY_POINTS = 200_000

#: The app's caches of encoded bodies, made when the stores are prepared.
LIST_CACHE = web.AppKey("vaults_list_cache", ReadCache[int])
DETAIL_CACHE = web.AppKey("vaults_detail_cache", ReadCache[tuple[int, int]])


async def list_vaults(request: web.Request) -> web.Response:
    return await cached_response(request, request.app[LIST_CACHE], _list_body)


async def get_vault(request: web.Request) -> web.Response:
    return await cached_response(request, request.app[DETAIL_CACHE], _detail_body)


async def _list_body(request: web.Request) -> bytes:
    req = parse_list(request.rel_url.query)
    page = req.page
    result = await reads.list_vaults(request.app[DB], req.filter, page)
    pagination = paging.pagination(
        req.mode, page.limit, page.offset, result.total, result.more,
        lambda: encode_cursor(page.sort, result.last_key) if result.last_key else None)
    aggregates = {
        "total": result.total,
        "totalTvlUsd": result.total_tvl_usd,
        "attentionNeeded": result.attention_needed,
        "byTier": {t: result.by_tier.get(t, 0) for t in VAULT_TIERS},
        "byChain": {c: result.by_chain.get(c, 0) for c in VAULT_CHAINS},
        "byProtocol": dict(sorted(result.by_protocol.items())),
    }
    return msgspec.json.encode({"items": [item(v) for v in result.vaults],
                                "pagination": pagination, "aggregates": aggregates,
                                "sort": page.sort})


async def _detail_body(request: web.Request) -> bytes:
    address = normalize_address(request.match_info["address"])
    if address is None:
        raise params.bad("address", "address must be 0x followed by 40 hex digits")
    query = request.rel_url.query
    params.known(query, ("chain",))
    chain = params.enum(query, "chain", VAULT_CHAINS)
    if chain is None:
        raise params.bad("chain", "chain is required", allowed=list(VAULT_CHAINS))
    db = request.app[DB]
    vault = await reads.get_vault(db, chain, address)
    if vault is None:
        raise ApiError(404, "unknown vault", address=address, chain=chain)
    end = vault.rating_ts
    start = end - HISTORY_DAYS * 86400
    history = await reads.rating_history(db, chain, address, start, end, MAX_HISTORY_POINTS)
    addresses = [e["address"] for e in composition_entries(vault)
                 if isinstance(e.get("address"), str)]
    depeg = await reads.underlying_ratings(db, chain, addresses)
    return msgspec.json.encode(detail(vault, depeg, history, start, end, HISTORY_DAYS,
                                      len(history) >= MAX_HISTORY_POINTS))


async def _prepare_store(app: web.Application) -> None:
    """Vault tables exist before the first request; the ratings tables too (composition
    reads them), whichever route module starts first."""
    db = app[DB]
    await VaultStore(db).migrate()
    await RatingsStore(db).migrate()
    # No wall-clock field in these bodies: none expires by age (max_age infinite).
    check = app[CONFIG].api.ratings_check_seconds
    app[LIST_CACHE] = ReadCache(lambda: read_version(db), max_age=math.inf,
                                check_interval=check, clock=app[TICKS])
    app[DETAIL_CACHE] = ReadCache(lambda: read_versions(db), max_age=math.inf,
                                  check_interval=check, clock=app[TICKS])


def add_routes(app: web.Application) -> None:
    app.on_startup.append(_prepare_store)
    app.router.add_get("/vaults", list_vaults, allow_head=False)
    app.router.add_get("/vaults/{address}", get_vault, allow_head=False)

