"""Health registry, ops listener and API routes over real loopback HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from monitor import health, metrics
from monitor.kafka.embedded import EmbeddedBroker, free_port
from monitor.ops_server import OpsServer
from monitor.storage import connect

pytestmark = pytest.mark.ops


@pytest.fixture(autouse=True)
def clean_checks() -> Iterator[None]:
    for name in health.registered_checks():
        health.unregister_check(name)
    yield
    for name in health.registered_checks():
        health.unregister_check(name)


@pytest.fixture
async def ops() -> AsyncIterator[str]:
    server = OpsServer("127.0.0.1", 0)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        await server.stop()


async def get(url: str) -> tuple[int, str, dict[str, object] | None]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        text = await r.text()
        body = await r.json(content_type=None) if r.content_type == "application/json" else None
        return r.status, text, body


async def ok_check() -> tuple[bool, str]:
    return True, "fine"


async def bad_check() -> tuple[bool, str]:
    return False, "store down"


async def test_healthz_and_metrics(ops: str) -> None:
    status, _, body = await get(f"{ops}/healthz")
    assert status == 200 and body == {"status": "ok"}
    status, text, _ = await get(f"{ops}/metrics")
    assert status == 200
    assert "depeg_build_info{" in text
    # Zero-initialised series are exported before anything happened.
    for tier in metrics.TIERS:
        assert f'depeg_tokens_by_tier{{tier="{tier}"}}' in text
    assert 'depeg_tier_changes_total{new_tier="critical",old_tier="ok"}' in text
    assert 'depeg_deliveries_total{status="max_retries_exceeded"}' in text


async def test_readyz_reports_every_check(ops: str) -> None:
    status, _, body = await get(f"{ops}/readyz")
    assert status == 200 and body == {"status": "ready", "checks": {}}
    health.register_check("a", ok_check)
    status, _, body = await get(f"{ops}/readyz")
    assert status == 200
    assert body == {"status": "ready", "checks": {"a": {"ok": True, "detail": "fine"}}}
    health.register_check("b", bad_check)
    status, _, body = await get(f"{ops}/readyz")
    assert status == 503
    assert body == {"error": "not ready", "checks": {
        "a": {"ok": True, "detail": "fine"}, "b": {"ok": False, "detail": "store down"}}}
    health.unregister_check("b")
    assert (await get(f"{ops}/readyz"))[0] == 200


async def test_hanging_or_crashing_check_fails_not_500(
    monkeypatch: pytest.MonkeyPatch, ops: str
) -> None:
    never = asyncio.Event()

    async def hangs() -> tuple[bool, str]:
        await never.wait()
        return True, ""

    async def crashes() -> tuple[bool, str]:
        raise RuntimeError("boom")

    monkeypatch.setattr(health, "CHECK_TIMEOUT_SECONDS", 0.2)
    health.register_check("hangs", hangs)
    health.register_check("crashes", crashes)
    status, _, body = await get(f"{ops}/readyz")
    assert status == 503
    assert body is not None
    checks = body["checks"]
    assert isinstance(checks, dict)
    assert "timed out" in checks["hangs"]["detail"]
    assert "RuntimeError: boom" in checks["crashes"]["detail"]


async def test_store_check_sqlite(tmp_path: Path) -> None:
    db = await connect(f"sqlite:///{tmp_path / 'h.db'}")
    check = health.store_check(db)
    assert (await check())[0] is True
    await db.close()
    ok, detail = await health._run_one(check, 1.0)
    assert ok is False and detail


@pytest.mark.postgres
async def test_store_check_postgres(pg_url: str) -> None:
    db = await connect(pg_url)
    try:
        assert (await health.store_check(db)())[0] is True
    finally:
        await db.close()


@pytest.mark.broker
async def test_broker_check(broker: EmbeddedBroker) -> None:
    assert (await health.broker_check(broker.bootstrap_servers)())[0] is True
    dead = f"127.0.0.1:{free_port()}"
    ok, detail = await health.broker_check(dead)()
    assert ok is False and dead in detail
    # First reachable server of a list wins; a callable is read at check time.
    assert (await health.broker_check(lambda: f"{dead},{broker.bootstrap_servers}")())[0]


async def test_consumer_check_reads_metrics() -> None:
    name = "store"
    check = health.consumer_check(name, max_lag=100)
    try:
        metrics.ASSIGNED_PARTITIONS.remove(name)
    except KeyError:
        pass
    ok, detail = await check()
    assert not ok and "no partition assignment" in detail
    metrics.ASSIGNED_PARTITIONS.labels(name).set(2)
    metrics.CONSUMER_LAG.labels(name, "0").set(30)
    metrics.CONSUMER_LAG.labels(name, "1").set(60)
    ok, detail = await check()
    assert ok and "lag 90" in detail
    metrics.CONSUMER_LAG.labels(name, "1").set(80)
    ok, detail = await check()
    assert not ok and "lag 110" in detail
    metrics.ASSIGNED_PARTITIONS.remove(name)
    metrics.CONSUMER_LAG.remove(name, "0")
    metrics.CONSUMER_LAG.remove(name, "1")


async def test_api_app_serves_the_same_routes(tmp_path: Path) -> None:
    from aiohttp import web

    from monitor.api.app import create_app
    from monitor.api.health import OPENAPI_PATHS
    from monitor.config import Config

    assert set(OPENAPI_PATHS) == {"/healthz", "/readyz", "/metrics"}
    db = await connect(f"sqlite:///{tmp_path / 'api.db'}")
    app = create_app(Config(), db)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        base = f"http://127.0.0.1:{port}"
        assert (await get(f"{base}/healthz"))[0] == 200
        health.register_check("bad", bad_check)
        assert (await get(f"{base}/readyz"))[0] == 503
        status, text, _ = await get(f"{base}/metrics")
        assert status == 200 and "depeg_build_info" in text
    finally:
        await runner.cleanup()
        await db.close()
