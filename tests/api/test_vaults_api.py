"""E4 GET /vaults and E5 GET /vaults/{address} on a live server, SQLite and PostgreSQL.

Every page walk is checked against a brute-force filter and sort over the same vaults in
Python: the concatenated pages must equal the brute-force order exactly (so they are
complete, disjoint and sorted), and the aggregates must equal counts over the brute-force
set.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.api.app import create_app
from monitor.api.vaults.catalogue import (
    CONTRACT_TYPES,
    PROTOCOLS,
    TAG_KEYS,
    UNDERLYING_RISKS,
    VAULT_CHAINS,
    VAULT_TIERS,
)
from monitor.config import ApiConfig, Config
from monitor.storage import connect
from monitor.storage.ratings import RatingsStore
from monitor.storage.vaults import FactsUpdate, VaultStore
from monitor.storage.vaults_read import SORTS
from tests.readapi_support import api_headers, pages, serve, story
from tests.vaults_support import (
    T0,
    USDC_ETH,
    Population,
    load,
    population,
    rating_record,
    rating_row,
    replace_facts,
    vault_address,
)

N = 300
#: The page walks send hundreds of requests with one key: no per-key rate limit here.
UNLIMITED = Config(api=ApiConfig(rate_limit_per_second=0))


class Api:
    def __init__(self, base: str, session: aiohttp.ClientSession, pop: Population) -> None:
        self.base, self.session = base, session
        self.rows = pop.expected()

    async def get(self, path: str, **params: Any) -> tuple[int, Any]:
        query = {k: str(v).lower() if isinstance(v, bool) else str(v)
                 for k, v in params.items()}
        async with self.session.get(self.base + path, params=query) as resp:
            return resp.status, await resp.json()


@pytest.fixture
async def api(storage_url: str) -> AsyncIterator[Api]:
    db = await connect(storage_url)
    app = create_app(UNLIMITED, db)
    try:
        async with serve(app) as base, aiohttp.ClientSession(
                headers=await api_headers(db)) as session:
            pop = population(N)
            await load(VaultStore(db), pop)
            snaps, events = story("eth", USDC_ETH, [("ok", 10, 1.0), ("critical", 90, 0.88)])
            await RatingsStore(db).write_batch(snaps, events)
            yield Api(base, session, pop)
    finally:
        await db.close()


def matches(row: dict[str, Any], p: dict[str, Any]) -> bool:
    for param, field in (("chain", "chain"), ("tier", "tier"), ("protocol", "protocol"),
                         ("contractType", "contract_type"),
                         ("underlyingRisk", "underlying_risk")):
        if param in p and row[field] != p[param]:
            return False
    if "underlying" in p and (row["underlying_symbol"] or "").lower() != p["underlying"].lower():
        return False
    if "minTvl" in p and (row["tvl_usd"] is None or row["tvl_usd"] < p["minTvl"]):
        return False
    if "minScore" in p and (row["rating"] is None or row["rating"] < p["minScore"]):
        return False
    if "maxScore" in p and (row["rating"] is None or row["rating"] > p["maxScore"]):
        return False
    if p.get("attentionNeeded") and not row["attention_needed"]:
        return False
    if "riskFlags" in p:
        flags = set(p["riskFlags"].split(","))
        have = flags & set(row["tags"])
        if (have != flags) if p.get("riskFlagsMode") == "all" else not have:
            return False
    if "q" in p:
        q = p["q"].lower()
        if not any(q in h for h in ((row["name"] or "").lower(), (row["symbol"] or "").lower(),
                                    row["address"])):
            return False
    return True


_FIELD = {"score": "rating", "tvl": "tvl_usd", "apy": "apy_pct", "looping": "looping_rate"}


def brute_force(rows: list[dict[str, Any]], p: dict[str, Any]) -> list[tuple[str, str]]:
    sort = p.get("sort", "score_desc")
    chosen = [r for r in rows if matches(r, p)]
    if sort == "name_asc":
        key = [((r["name"] or r["symbol"] or r["address"]).lower(), r["chain"], r["address"])
               for r in chosen]
        return [(k[1], k[2]) for k in sorted(key)]
    name, direction = sort.rsplit("_", 1)
    missing = -math.inf if direction == "desc" else math.inf
    keys = [(r[_FIELD[name]] if r[_FIELD[name]] is not None else missing, r["chain"],
             r["address"]) for r in chosen]
    keys.sort(reverse=direction == "desc")
    return [(k[1], k[2]) for k in keys]


def check_aggregates(agg: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    assert agg["total"] == len(rows)
    tiers = Counter(r["tier"] for r in rows)
    assert agg["byTier"] == {t: tiers.get(t, 0) for t in VAULT_TIERS}
    chains = Counter(r["chain"] for r in rows)
    assert agg["byChain"] == {c: chains.get(c, 0) for c in VAULT_CHAINS}
    assert agg["byProtocol"] == dict(Counter(r["protocol"] or "unknown" for r in rows))
    assert agg["attentionNeeded"] == sum(r["attention_needed"] for r in rows)
    assert agg["totalTvlUsd"] == pytest.approx(sum(r["tvl_usd"] or 0 for r in rows))


async def walk(api: Api, mode: str, p: dict[str, Any], size: int) -> list[tuple[str, str]]:
    got: list[tuple[str, str]] = []
    want_rows = [r for r in api.rows if matches(r, p)]
    async for body in pages(api.get, "/vaults", p, mode, size):
        assert len(body["items"]) <= size
        got.extend((i["chain"], i["address"]) for i in body["items"])
        assert body["pagination"]["total"] == len(want_rows)
        check_aggregates(body["aggregates"], want_rows)
    return got


def _opt(name: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(st.just({}), values.map(lambda v: {name: v}))


FILTERS = st.tuples(
    _opt("chain", st.sampled_from(VAULT_CHAINS)),
    _opt("tier", st.sampled_from(VAULT_TIERS)),
    _opt("protocol", st.sampled_from(PROTOCOLS)),
    _opt("contractType", st.sampled_from(CONTRACT_TYPES)),
    _opt("underlying", st.sampled_from(["USDC", "usdt", "WETH", "DAI"])),
    _opt("underlyingRisk", st.sampled_from(UNDERLYING_RISKS)),
    _opt("minTvl", st.sampled_from([0, 1e6, 5e6, 3e8])),
    _opt("minScore", st.sampled_from([0, 25, 50, 80])),
    _opt("maxScore", st.sampled_from([50, 74.5, 100])),
    _opt("attentionNeeded", st.booleans()),
    _opt("riskFlags", st.lists(st.sampled_from(TAG_KEYS[:6]), min_size=1, max_size=3,
                               unique=True).map(",".join)),
    _opt("riskFlagsMode", st.sampled_from(["any", "all"])),
    _opt("q", st.sampled_from(["vault 1", "ALPHA", "0a1", "v4", "eta"])),
    _opt("sort", st.sampled_from(list(SORTS))),
).map(lambda parts: {k: v for part in parts for k, v in part.items()})


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(p=FILTERS, mode=st.sampled_from(["offset", "cursor"]),
       size=st.sampled_from([17, 50, 500]))
async def test_pages_complete_disjoint_and_in_brute_force_order(
        api: Api, p: dict[str, Any], mode: str, size: int) -> None:
    got = await walk(api, mode, p, size)
    assert got == brute_force(api.rows, p), p


async def test_every_sort_in_both_modes(api: Api) -> None:
    for sort in SORTS:
        for mode in ("offset", "cursor"):
            want = brute_force(api.rows, {"sort": sort})
            assert await walk(api, mode, {"sort": sort}, 61) == want, (sort, mode)


async def test_defaults_and_limits(api: Api) -> None:
    status, body = await api.get("/vaults")
    assert status == 200 and len(body["items"]) == 50
    assert body["pagination"] == {"mode": "offset", "total": N, "hasMore": True, "page": 1,
                                  "pageSize": 50, "totalPages": 6}
    assert body["sort"] == "score_desc"
    status, body = await api.get("/vaults", cursor="")
    assert status == 200 and len(body["items"]) == 100 and body["pagination"]["limit"] == 100
    status, body = await api.get("/vaults", limit=500)
    assert status == 200 and len(body["items"]) == N
    for bad in ({"pageSize": 501}, {"pageSize": 0}, {"limit": 501}, {"page": 0},
                {"page": 1, "limit": 5}, {"pagesize": 5}, {"cursor": "nonsense"},
                {"riskFlags": "vault-new,nope"}, {"minScore": 101}, {"minTvl": -1},
                {"riskFlagsMode": "some"}, {"chain": "linea"}, {"sort": "score"},
                {"attentionNeeded": "maybe"}):
        status, body = await api.get("/vaults", **bad)
        assert status == 400 and body["error"] and body["parameter"], (bad, body)
    # A cursor made for one sort is refused for another.
    _, body = await api.get("/vaults", limit=5, sort="tvl_desc")
    status, body = await api.get("/vaults", limit=5, sort="tvl_asc",
                                 cursor=body["pagination"]["nextCursor"])
    assert status == 400 and body["parameter"] == "cursor"


async def test_items_carry_the_published_record(api: Api) -> None:
    _, body = await api.get("/vaults", pageSize=500)
    by_key = {(r["chain"], r["address"]): r for r in api.rows}
    for it in body["items"]:
        row = by_key[(it["chain"], it["address"])]
        assert (it["rating"], it["tier"], it["verdict"], it["tags"]) == (
            row["rating"], row["tier"], row["verdict"], row["tags"])
        assert it["risk"] == row["risk"] and "contributions" not in it
        assert repr(it["rating"]) == repr(row["rating"])  # 78, as on the topic, not 78.0
        assert it["explanation"] == row["explanation"]
        assert it["underlying"]["symbol"] == row["underlying_symbol"]


async def test_requires_an_api_key(api: Api) -> None:
    async with aiohttp.ClientSession() as anonymous:
        for path in ("/vaults", f"/vaults/{vault_address(0)}?chain=eth"):
            async with anonymous.get(api.base + path) as resp:
                assert resp.status == 401 and "error" in await resp.json()


async def test_detail(api: Api, storage_url: str) -> None:
    row = next(r for r in api.rows if r["underlying_symbol"] == "USDC" and r["chain"] == "eth")
    status, body = await api.get(f"/vaults/{row['address'].upper().replace('0X', '0x')}",
                                 chain="eth")
    assert status == 200, body
    assert body["address"] == row["address"] and body["rating"] == row["rating"]
    assert body["contributions"] == row["contributions"] and body["risk"] == row["risk"]
    [part] = body["composition"]
    # The depeg monitor's current rating of USDC on eth (the story ends critical at 90).
    assert part["address"] == USDC_ETH and part["share_pct"] == 100.0
    assert part["depeg"]["tier"] == "critical" and part["depeg"]["rating"] == 90
    assert body["looping_markets"] == row["looping_markets"]
    assert body["code_findings"] == row["code_findings"]
    assert body["lending_market"] == row["lending_market"]
    assert body["lst_collateral_markets"] == []
    assert [p["rating"] for p in body["history"]["points"]] == [row["rating"]]

    for query, status_wanted in (({}, 400), ({"chain": "arb"}, 404), ({"chain": "sol"}, 400),
                                 ({"chain": "eth", "hours": 1}, 400)):
        status, body = await api.get(f"/vaults/{row['address']}", **query)
        assert status == status_wanted and body["error"], (query, body)
    status, body = await api.get("/vaults/0x1234", chain="eth")
    assert status == 400 and body["parameter"] == "address"


async def test_history_covers_90_days_of_records(storage_url: str) -> None:
    db = await connect(storage_url)
    try:
        store = VaultStore(db)
        await store.migrate()
        vault = vault_address(0)
        facts = {"chain": "eth", "vault": vault, "name": "H",
                 "composition": [{"symbol": "USDC", "address": USDC_ETH, "share_pct": 60},
                                 {"symbol": "X", "address": vault_address(99), "share_pct": 40}]}
        days = [0, 5, 20, 50, 95, 99, 100]  # the first two fall outside 90 days of day 100
        records = [rating_record("eth", vault, T0 + d * 86400, d, [], False) for d in days]
        # Delivered out of order: the latest row still ends up the newest record.
        order = [6, 0, 3, 1, 5, 2, 4]
        await store.write_batch([FactsUpdate("eth", vault, T0, facts)], replace_facts,
                                [rating_row(records[i]) for i in order])
        app = create_app(UNLIMITED, db)
        async with serve(app) as base, aiohttp.ClientSession(
                headers=await api_headers(db)) as session:
            async with session.get(f"{base}/vaults/{vault}", params={"chain": "eth"}) as resp:
                body = await resp.json()
        assert body["rating"] == 100.0
        assert [p["rating"] for p in body["history"]["points"]] == [20, 50, 95, 99, 100]
        assert [c["depeg"] for c in body["composition"]] == [None, None]  # nothing rated
        assert [c["share_pct"] for c in body["composition"]] == [60, 40]
    finally:
        await db.close()
