"""GET /rwa on a live server over a store of 1,000 tokens across the seven chains."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from monitor.api.app import create_app
from monitor.chains import CHAINS
from monitor.config import Config
from monitor.registry import parse_registry, tags_for
from monitor.storage import connect
from monitor.storage.ratings import RatingsStore
from tests.readapi_support import api_headers, pages, population, registry_file, serve

N = 1000


class Api:
    def __init__(self, base: str, session: aiohttp.ClientSession, expected: list[dict[str, Any]]):
        self.base, self.session, self.expected = base, session, expected

    async def get(self, path: str, **params: Any) -> tuple[int, Any]:
        async with self.session.get(self.base + path, params=params) as resp:
            return resp.status, await resp.json()


@pytest.fixture
async def api(storage_url: str, tmp_path: Path) -> AsyncIterator[Api]:
    snaps, registry_text = population(N)
    registry_section = registry_file(tmp_path, registry_text)
    registry = {(t.chain, t.address): t for t in parse_registry(registry_text)}
    db = await connect(storage_url)
    store = RatingsStore(db)
    await store.migrate()
    await store.write_batch(snaps, [])
    expected = []
    for s in snaps:
        reg = registry.get((s.chain, s.token_address))
        expected.append({
            "address": s.token_address, "chain": s.chain, "tier": s.tier, "rating": s.rating,
            "mcap": reg.market_cap_usd if reg else None,
            "tags": set(tags_for(reg.peg_type if reg else None)),
            "symbol": reg.symbol if reg else s.symbol, "name": reg.name if reg else "",
            "dev": abs(s.deviation_pct) if s.deviation_pct is not None else None})
    app = create_app(Config(registry=registry_section), db)
    try:
        async with serve(app) as base, aiohttp.ClientSession(
                headers=await api_headers(db)) as session:
            yield Api(base, session, expected)
    finally:
        await db.close()


def matches(row: dict[str, Any], params: dict[str, Any]) -> bool:
    if "chain" in params and row["chain"] != params["chain"]:
        return False
    if "tier" in params and row["tier"] != params["tier"]:
        return False
    if "minMcap" in params and (row["mcap"] is None or row["mcap"] < params["minMcap"]):
        return False
    if "tags" in params and not row["tags"] & set(params["tags"].split(",")):
        return False
    if "q" in params:
        q = params["q"].lower()
        hay = (row["symbol"].lower(), row["name"].lower(), row["address"])
        if not any(q in h for h in hay):
            return False
    return True


async def walk(api: Api, mode: str, params: dict[str, Any], size: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    async for body in pages(api.get, "/rwa", params, mode, size):
        items.extend(body["items"])
        expected_rows = [r for r in api.expected if matches(r, params)]
        agg = body["aggregates"]
        assert agg["total"] == body["pagination"]["total"] == len(expected_rows)
        tiers = Counter(r["tier"] for r in expected_rows)
        assert agg["byTier"] == {t: tiers.get(t, 0) for t in agg["byTier"]}
        assert sum(agg["byTier"].values()) == len(expected_rows)
        assert all(agg["byChain"][c] == sum(r["chain"] == c for r in expected_rows)
                   for c in CHAINS)
    return items


CASES: list[tuple[dict[str, Any], str | None]] = [
    ({}, "rating"),
    ({"sort": "score", "order": "asc"}, "rating"),
    ({"sort": "market_cap_usd", "order": "desc"}, "mcap"),
    ({"sort": "market_cap_usd", "order": "asc", "chain": "bsc"}, "mcap"),
    ({"sort": "deviation", "tier": "critical"}, "dev"),
    ({"sort": "symbol", "tags": "gold,yield"}, None),
    ({"sort": "updated_at", "minMcap": 5e9}, None),
    ({"q": "number 1", "order": "asc"}, "rating"),
    ({"tags": "unregistered", "chain": "linea"}, "rating"),
]


@pytest.mark.parametrize("mode", ["offset", "cursor"])
async def test_pages_disjoint_complete_and_sorted(api: Api, mode: str) -> None:
    for params, key in CASES:
        items = await walk(api, mode, params, 97)
        addresses = [(i["chain"], i["address"]) for i in items]
        assert len(addresses) == len(set(addresses)), params  # disjoint
        want = {(r["chain"], r["address"]) for r in api.expected if matches(r, params)}
        assert set(addresses) == want, params  # complete
        if key:
            by_addr = {(r["chain"], r["address"]): r for r in api.expected}
            values = [by_addr[a][key] for a in addresses]
            present = [v for v in values if v is not None]
            assert values[:len(present)] == present  # missing values sort last
            desc = params.get("order", "desc") == "desc"
            assert present == sorted(present, reverse=desc), params


async def test_items_carry_the_risk_envelope(api: Api) -> None:
    status, body = await api.get("/rwa", tier="critical", pageSize=5)
    assert status == 200
    for it in body["items"]:
        risk = it["risk"]
        assert risk["overallRisk"] == risk["score"] == it["rating"]
        assert risk["high"] == 1 and risk["count"] == 1
        [issue] = risk["issues"]
        [tag] = issue["tags"]
        assert tag["type"] == "depegRisk" and tag["key"] == "depeg_price_deviation"
        assert issue["categories"]["price_stability"]["tags"] == {"depeg_price_deviation": True}
        assert tag["context"]["detected_at"].endswith("Z")
    status, body = await api.get("/rwa", tier="ok", pageSize=5)
    assert all(it["risk"]["issues"] == [] for it in body["items"])
    status, body = await api.get("/rwa", collapsedOnly="true", pageSize=500)
    assert status == 200 and body["items"]
    assert all(it["collapsed"] and it["tier"] == "critical" for it in body["items"])
    assert all(float(it["price_usd"]) < 0.5 for it in body["items"])


@pytest.mark.parametrize(("params", "name", "allowed"), [
    ({"chain": "sol"}, "chain", list(CHAINS)),
    ({"tier": "bad"}, "tier", ["ok", "watch", "warning", "critical", "premium"]),
    ({"sort": "tvl"}, "sort", ["score", "market_cap_usd", "symbol", "deviation", "updated_at"]),
    ({"order": "up"}, "order", ["asc", "desc"]),
    ({"collapsedOnly": "maybe"}, "collapsedOnly", ["true", "false"]),
    ({"tags": "standard,meme"}, "tags", None),
])
async def test_unknown_values_name_the_allowed_ones(api: Api, params: dict[str, str], name: str,
                                                    allowed: list[str] | None) -> None:
    status, body = await api.get("/rwa", **params)
    assert status == 400 and body["parameter"] == name and "error" in body
    if allowed is not None:
        assert body["allowed"] == allowed
    else:
        assert "standard" in body["allowed"]


@pytest.mark.parametrize("params", [
    {"pageSize": "501"}, {"pageSize": "0"}, {"page": "x"}, {"limit": "600"},
    {"page": "2", "cursor": "abc"}, {"cursor": "!!!"}, {"minMcap": "-1"}, {"minMcap": "nan"},
    {"q": "a" * 101}, {"q": "a\x00b"}, {"pagesize": "10"},
])
async def test_bad_pagination_and_filters(api: Api, params: dict[str, str]) -> None:
    status, body = await api.get("/rwa", **params)
    assert status == 400 and isinstance(body["error"], str)


async def test_cursor_is_bound_to_its_sort(api: Api) -> None:
    status, body = await api.get("/rwa", limit=10)
    cursor = body["pagination"]["nextCursor"]
    status, body = await api.get("/rwa", limit=10, cursor=cursor, sort="symbol")
    assert status == 400 and body["parameter"] == "cursor"


async def test_forged_cursors_are_400_not_500(api: Api) -> None:
    import base64
    import json

    for payload in (["score", "desc", "x", "eth", "0x1"], ["symbol", "asc", 1.5, "eth", "0x"],
                    ["score", "desc", 1.0, 5, "0x"], {"a": 1}, [1, 2]):
        cursor = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()
        sort = payload[0] if isinstance(payload, list) and payload[0] == "symbol" else "score"
        status, body = await api.get("/rwa", cursor=cursor, sort=sort)
        assert status == 400 and body["parameter"] == "cursor", (payload, body)
