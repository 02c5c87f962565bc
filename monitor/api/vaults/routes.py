"""Handlers: ``GET /vaults`` (E4, the vault list) and ``GET /vaults/{address}`` (E5).

Both read the vault store that the store writer fills (:mod:`monitor.storage.vaults_read`);
neither touches Kafka. The depeg ratings of a vault's underlyings (E5 composition) come
from the ratings store, so E5 shows the same tier ``/rwa`` shows for the token.
"""

from __future__ import annotations

from aiohttp import web

from ...chains import normalize_address
from ...storage import vaults_read as reads
from ...storage.ratings import RatingsStore
from ...storage.vaults import HISTORY_DAYS, VaultStore
from .. import paging, params
from ..context import DB, json_response
from ..cursor import encode_cursor
from ..errors import ApiError
from .catalogue import VAULT_CHAINS, VAULT_TIERS
from .request import parse_list
from .view import composition_entries, detail, item

#: History points returned at most (a vault re-rated every minute for 90 days fits).
MAX_HISTORY_POINTS = 200_000


async def list_vaults(request: web.Request) -> web.Response:
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
    return json_response({"items": [item(v) for v in result.vaults],
                          "pagination": pagination, "aggregates": aggregates,
                          "sort": page.sort})


async def get_vault(request: web.Request) -> web.Response:
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
    return json_response(detail(vault, depeg, history, start, end, HISTORY_DAYS,
                                len(history) >= MAX_HISTORY_POINTS))


async def _prepare_store(app: web.Application) -> None:
    """Vault tables exist before the first request; the ratings tables too (composition
    reads them), whichever route module starts first."""
    await VaultStore(app[DB]).migrate()
    await RatingsStore(app[DB]).migrate()


def add_routes(app: web.Application) -> None:
    app.on_startup.append(_prepare_store)
    app.router.add_get("/vaults", list_vaults, allow_head=False)
    app.router.add_get("/vaults/{address}", get_vault, allow_head=False)

