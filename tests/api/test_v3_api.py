"""The V3 surface on a live server: E9 (public, cached), E3 (graded pegged tokens), the
spec's V3 error rows and headers, and compute-unit billing seen through GET /usage."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from monitor.storage import Database
from monitor.storage.ratings import RatingsStore
from tests.readapi_support import story
from tests.webhook_support import (
    api_client,
    delivery_with_attempts,
    make_config,
    new_key,
    receiver,
    subscribe,
)

USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
DEAD = "0x" + "de" * 20
# USDC on eth: a critical episode that recovered; DEAD on arb: collapsing, still critical.
USDC_PATH = [("ok", 10, 1.0), ("critical", 90, 0.88), ("ok", 10, 1.0)]
DEAD_PATH = [("ok", 5, 1.0), ("warning", 65, 0.95), ("critical", 90, 0.3)]
# The published 11-band scale and the legacy 5 letters (independent of the code).
V2 = [(5, "A+"), (12, "A"), (20, "A-"), (28, "B+"), (37, "B"), (46, "B-"), (56, "C+"),
      (66, "C"), (77, "C-"), (88, "D"), (100, "F")]
V1 = [(19, "A"), (34, "B"), (59, "C"), (74, "D"), (100, "F")]


def grade_of(score: float, table: list[tuple[int, str]]) -> str:
    return next(g for high, g in table if score <= high)


@asynccontextmanager
async def server(storage_url: str) -> AsyncIterator[tuple[Any, Database]]:
    async with api_client(make_config(storage_url)) as (client, db):
        store = RatingsStore(db)
        await store.migrate()
        a_snaps, a_events = story("eth", USDC, USDC_PATH)
        b_snaps, b_events = story("arb", DEAD, DEAD_PATH)
        await store.write_batch(a_snaps + b_snaps, a_events + b_events)
        yield client, db


def h(key: str) -> dict[str, str]:
    return {"x-api-key": key}


@pytest.fixture
async def live(tmp_path: Any) -> AsyncIterator[tuple[Any, Database, str]]:
    async with server(f"sqlite:///{tmp_path / 'v3.db'}") as (client, db):
        key, _ = await new_key(db)
        yield client, db, key


async def ledger_lines(db: Database) -> int:
    return int(await db.fetchval("SELECT COUNT(*) FROM cu_ledger"))


async def test_e9_is_public_cached_and_free(live: Any) -> None:
    client, db, _ = live
    resp = await client.get("/v3/framework")  # no key
    assert resp.status == 200
    assert resp.headers["Cache-Control"] == "public, max-age=300"
    assert resp.headers["Service-Api-Version"] == "3.0"
    assert resp.headers["Service-Framework-Version"] == "v1"
    etag = resp.headers["ETag"]
    assert etag.startswith('"') and etag.endswith('"')
    body = await resp.json()
    assert body["supported_versions"] == ["v1"] and body["supported_schemes"] == ["v1", "v2"]
    assert [c["key"] for c in body["categories"]] == [
        "smart_contract", "operational_governance", "asset_collateral", "market_liquidity",
        "counterparty", "hack_exploit_history", "chain_infrastructure"]
    assert sum(c["weight"] for c in body["categories"]) == pytest.approx(1.0)
    statuses = [cr["status"] for c in body["categories"] for cr in c["criteria"]]
    assert body["coverage"] == {"criteria_total": len(statuses),
                                "criteria_live": statuses.count("live"),
                                "criteria_planned": statuses.count("planned")}
    tags = [t for c in body["categories"] for cr in c["criteria"] for t in cr["tags"]]
    assert len(tags) == len(set(tags)) == 41
    for match in (etag, f"W/{etag}", f'"nope", {etag}', "*"):
        again = await client.get("/v3/framework", headers={"If-None-Match": match})
        assert again.status == 304, match
        assert await again.read() == b"" and again.headers["ETag"] == etag
        assert again.headers["Cache-Control"] == "public, max-age=300"
    other = await client.get("/v3/framework", headers={"If-None-Match": '"other"'})
    assert other.status == 200 and await other.json() == body
    bad = await client.get("/v3/framework?framework_version=v2")
    assert bad.status == 400
    assert (await bad.json())["supported_versions"] == ["v1"]
    assert await ledger_lines(db) == 0  # E9 is never billed


async def test_e3_graded_token_with_pins_and_headers(live: Any) -> None:
    client, _, key = live
    resp = await client.get(f"/v3/rwa/{USDC}", headers=h(key))
    assert resp.status == 200, await resp.text()
    assert (resp.headers["Service-Api-Version"], resp.headers["Service-Framework-Version"],
            resp.headers["Service-Grading-Scheme"]) == ("3.0", "v1", "v2")
    body = await resp.json()
    assert body["schema_version"] == "3.0"
    # risk and metadata are the v2 record, verbatim: compare with GET /rwa's item.
    listed = await (await client.get("/rwa?chain=eth", headers=h(key))).json()
    [v2] = [i for i in listed["items"] if i["address"] == USDC]
    assert body["risk"] == v2.pop("risk")
    assert body["metadata"] == v2
    # By hand (rwa_v1.toml): peg_stability 0 (tier ok), peg_design 50 (unregistered),
    # oracle 50 (none observed), liquidity 50 (no slippage data), history 100 (a past
    # critical episode): 0.4*0 + 0.2*50 + 0.1*50 + 0.2*50 + 0.1*100 = 35 > rating 10.
    comp = body["composite"]
    assert comp["framework_score"] == 35.0 and comp["upstream_risk"] == 10.0
    assert comp["score"] == 35.0 and comp["clamped_by_upstream"] is False
    assert comp["grade"] == grade_of(35.0, V2) == "B"
    assert comp["contributors"]["history"] == {"score": 100.0, "weight": 0.1}
    hist = {c["key"]: c for c in body["categories"]}["history"]["criteria"][0]
    assert hist["result"] == "fail"
    assert hist["evidence"] == {"tags": ["rwa-past-critical-depeg"],
                                "facts": {"episodes_total": 1}}
    cov = body["coverage"]
    assert cov["criteria_evaluated"] <= cov["criteria_live"] < cov["criteria_total"]
    # The legacy scheme, pinned: same score, its own letters, echoed in the header.
    resp = await client.get(f"/v3/rwa/{USDC}?chain=eth&grading_scheme=v1", headers=h(key))
    assert resp.headers["Service-Grading-Scheme"] == "v1"
    legacy = await resp.json()
    assert legacy["composite"]["grade"] == grade_of(35.0, V1) == "C"
    assert legacy["composite"]["score"] == 35.0


async def test_e3_floor_by_the_live_rating(live: Any) -> None:
    client, _, key = live
    body = await (await client.get(f"/v3/rwa/{DEAD}", headers=h(key))).json()
    comp = body["composite"]
    # framework: 0.4*100 + 0.2*50 + 0.1*50 + 0.2*50 + 0.1*100 = 75 < rating 90
    assert comp["framework_score"] == 75.0
    assert comp["score"] == 90.0 and comp["clamped_by_upstream"] is True
    assert comp["grade"] == "F" and comp["stars"] == 1


@pytest.mark.parametrize(("path", "status", "check"), [
    # The spec's Errors table, V3 rows (E3 shares them).
    (f"/v3/rwa/{USDC}?framework_version=v2", 400,
     lambda b: b["supported_versions"] == ["v1"] and b["error"]),
    (f"/v3/rwa/{USDC}?grading_scheme=v3", 400,
     lambda b: b["supported_schemes"] == ["v1", "v2"] and b["error"]),
    (f"/v3/rwa/{USDC}?chain=sol", 400, lambda b: b["error"] == "Invalid chain"),
    (f"/v3/rwa/{USDC}?chain=", 400, lambda b: b["error"] == "Invalid chain"),
    ("/v3/rwa/0x" + "ab" * 20, 404, lambda b: b["error"] == "unknown token"),
    ("/v3/rwa/usdc", 400, lambda b: b["parameter"] == "address"),
    (f"/v3/rwa/{USDC}?hours=1", 400, lambda b: b["parameter"] == "hours"),
])
async def test_e3_error_rows(live: Any, path: str, status: int, check: Any) -> None:
    client, _, key = live
    resp = await client.get(path, headers=h(key))
    assert resp.status == status
    assert check(await resp.json())
    assert (await client.get(path)).status == 401  # and without a key, 401 first


async def test_usage_counts_every_billed_call_and_delivery_per_key(storage_url: str) -> None:
    async with server(storage_url) as (client, db), receiver() as rec:
        key_a, _ = await new_key(db, "a")
        key_b, _ = await new_key(db, "b")
        made: dict[str, dict[str, int]] = {"a": {}, "b": {}}  # calls made here, counted

        async def call(who: str, key: str, endpoint: str, method: str, path: str,
                       **kw: Any) -> Any:
            resp = await client.request(method, path, headers=h(key), **kw)
            made[who][endpoint] = made[who].get(endpoint, 0) + 1
            return resp

        sub = await subscribe(client, key_a, rec.url)
        made["a"]["E10"] = 1
        for _ in range(3):
            await call("a", key_a, "E3", "GET", f"/v3/rwa/{USDC}")
        await call("a", key_a, "E3", "GET", f"/v3/rwa/{USDC}?grading_scheme=x")  # 4xx too
        await call("a", key_a, "E3", "GET", "/v3/rwa/0x" + "12" * 20)  # 404 too
        await call("a", key_a, "E11", "GET", f"/webhooks/subscriptions/{sub['id']}")
        await call("a", key_a, "E12", "POST", f"/webhooks/subscriptions/{sub['id']}/test")
        await call("b", key_b, "E3", "GET", f"/v3/rwa/{DEAD}")
        await call("b", key_b, "E11", "GET", f"/webhooks/subscriptions/{sub['id']}")  # 404
        # Free: E9, /usage itself, and requests without a valid key.
        await client.get("/v3/framework")
        await client.get(f"/v3/rwa/{USDC}", headers=h("dpm_not_a_key"))
        # Two deliveries to A's subscription, attempted 3 and 5 times: 2 CU, not 8.
        for attempts in (3, 5):
            await delivery_with_attempts(db, sub["id"], attempts)
        made["a"]["delivery"] = 2

        for who, key in (("a", key_a), ("b", key_b)):
            usage = await (await client.get("/usage?groupBy=endpoint", headers=h(key))).json()
            got = {i["endpoint"]: i["cu"] for i in usage["items"]}
            assert got == made[who], who
            assert usage["total_cu"] == sum(made[who].values())
            by_day = await (await client.get("/usage?groupBy=day", headers=h(key))).json()
            today = time.strftime("%Y-%m-%d", time.gmtime())
            assert by_day["items"] == [{"day": today, "cu": sum(made[who].values())}]
            plain = await (await client.get(f"/usage?from={today}&to={today}",
                                            headers=h(key))).json()
            assert plain["total_cu"] == sum(made[who].values()) and "items" not in plain
        # Another day's window holds nothing.
        empty = await (await client.get("/usage?from=2020-01-01&to=2020-01-31",
                                        headers=h(key_a))).json()
        assert empty["total_cu"] == 0
        assert (await client.get("/usage")).status == 401


@pytest.mark.parametrize("query", [
    "groupBy=week", "from=yesterday", "from=2026-01-02&to=2026-01-01", "to=2026-13-01",
    "from=2020-01-01&to=2026-01-01", "key=someone-else", "from=" + "9" * 50,
])
async def test_usage_bad_queries(live: Any, query: str) -> None:
    client, _, key = live
    resp = await client.get(f"/usage?{query}", headers=h(key))
    assert resp.status == 400 and "error" in await resp.json()
