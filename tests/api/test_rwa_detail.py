"""GET /rwa/{address}, /openapi.json and the one error shape, on a live server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from monitor.api.app import create_app
from monitor.api.openapi import build_document
from monitor.config import ApiConfig, Config
from monitor.storage import connect
from monitor.storage.ratings import RatingsStore
from tests.readapi_support import api_headers, serve, story

USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
PATH = [("ok", 10, 1.0), ("watch", 45, 0.99), ("critical", 85, 0.88), ("critical", 90, 0.87),
        ("warning", 65, 0.95), ("ok", 20, 0.999), ("ok", 10, 1.0)]


async def boom(request: web.Request) -> web.Response:
    raise RuntimeError("secret internals")


async def slow_down(request: web.Request) -> web.Response:
    raise web.HTTPTooManyRequests(headers={"Retry-After": "7"})


async def echo(request: web.Request) -> web.Response:
    return web.Response(body=await request.read())


@pytest.fixture
async def base(storage_url: str) -> AsyncIterator[tuple[str, aiohttp.ClientSession]]:
    db = await connect(storage_url)
    store = RatingsStore(db)
    await store.migrate()
    snaps, events = story("eth", USDC, PATH)
    other = story("arb", USDC, [("ok", 5, 1.0)])  # the same address on a second chain
    await store.write_batch(snaps + other[0], events)
    app = create_app(Config(api=ApiConfig(max_body_bytes=1024)), db)
    app.router.add_get("/test/boom", boom)
    app.router.add_get("/test/slow", slow_down)
    app.router.add_post("/test/echo", echo)
    try:
        async with serve(app) as url, aiohttp.ClientSession(
                headers=await api_headers(db)) as session:
            yield url, session
    finally:
        await db.close()


async def get(base: tuple[str, aiohttp.ClientSession], path: str,
              **params: Any) -> tuple[int, Any, Any]:
    url, session = base
    async with session.get(url + path, params=params) as resp:
        return resp.status, await resp.json(), resp.headers


async def test_detail_shows_episode_history_and_metrics(base: Any) -> None:
    status, body, _ = await get(base, f"/rwa/{USDC.upper().replace('0X', '0x')}",
                                chain="eth", hours=2)
    assert status == 200, body
    assert body["tier"] == "ok" and body["registered"] is False
    [ep] = body["episodes"]
    assert ep["started_tier"] == "watch" and ep["worst_tier"] == "critical"
    assert ep["peak_deviation_pct"] == pytest.approx(-13.0) and ep["peak_rating"] == 90
    assert ep["recovery_seconds"] == 1200 and ep["ongoing"] is False
    points = body["history"]["points"]
    assert [p["tier"] for p in points] == [t for t, _, _ in PATH]
    # Every tier change matches the time series at its timestamp.
    by_time = {p["timestamp"]: p["tier"] for p in points}
    assert [e["data"]["new_tier"] for e in body["tier_changes"]] == [
        "watch", "critical", "warning", "ok"]
    assert all(by_time[e["timestamp"]] == e["data"]["new_tier"] for e in body["tier_changes"])
    metrics = body["snapshot"]["metrics"]
    assert len(metrics) >= 50
    assert metrics["window_seconds_critical"] == 600
    assert len(body["snapshot"]["signals"]) == 6
    # The window ends at the latest snapshot (event time), not at the wall clock.
    status, body, _ = await get(base, f"/rwa/{USDC}", chain="eth", hours=1)
    assert status == 200
    assert (body["history"]["from"], body["history"]["to"]) == (
        "2023-03-11T01:30:00Z", "2023-03-11T02:30:00Z")


async def test_detail_errors(base: Any) -> None:
    status, body, _ = await get(base, f"/rwa/{USDC}")
    assert status == 400 and body["parameter"] == "chain" and body["allowed"] == ["arb", "eth"]
    status, body, _ = await get(base, "/rwa/0x" + "ab" * 20, chain="eth")
    assert status == 404 and body["error"] == "unknown token"
    status, body, _ = await get(base, "/rwa/usdc", chain="eth")
    assert status == 400 and body["parameter"] == "address"
    status, body, _ = await get(base, f"/rwa/{USDC}", chain="eth", hours=721)
    assert status == 400 and body["maximum"] == 720
    status, body, _ = await get(base, f"/rwa/{USDC}", chain="eth", hours="0")
    assert status == 400


async def test_one_error_shape(base: Any) -> None:
    url, session = base
    status, body, _ = await get(base, "/nope")
    assert status == 404 and body == {"error": "Not Found"}
    async with session.post(url + "/rwa") as resp:
        assert resp.status == 405 and resp.headers["Allow"] == "GET"
        assert "error" in await resp.json()
    status, body, headers = await get(base, "/test/slow")
    assert status == 429 and headers["Retry-After"] == "7" and "error" in body
    status, body, _ = await get(base, "/test/boom")
    assert status == 500 and body == {"error": "internal server error"}
    async with session.post(url + "/test/echo", data=b"x" * 2048) as resp:
        assert resp.status == 413 and "error" in await resp.json()
    async with session.post(url + "/test/echo", data=b"x" * 100) as resp:
        assert resp.status == 200


async def test_openapi_describes_every_route(base: Any) -> None:
    status, doc, _ = await get(base, "/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.1")
    assert doc == build_document()
    assert doc["components"]["securitySchemes"]["ApiKeyAuth"]["name"] == "x-api-key"
    assert doc["paths"]["/openapi.json"]["get"]["security"] == []


def test_routes_and_document_agree() -> None:
    """Every route of the real app is in the document, and the document has nothing else."""
    from monitor.storage.sqlite import SqliteDatabase

    app = create_app(Config(), SqliteDatabase.__new__(SqliteDatabase))
    routes = {(r.resource.canonical, r.method.lower()) for r in app.router.routes()
              if r.resource is not None and r.method not in ("HEAD", "OPTIONS")}
    methods = {"get", "put", "post", "delete", "patch", "options", "head", "trace"}
    described = {(path, method) for path, ops in build_document()["paths"].items()
                 for method in ops if method in methods}  # not path-level "parameters"
    assert routes == described


def test_document_is_valid_openapi_3_1() -> None:
    from openapi_spec_validator import validate

    validate(build_document())  # raises with the offending path when it is not
