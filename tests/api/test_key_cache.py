"""API keys are remembered once verified, for at most ``api.key_cache_seconds``: a key
revoked by another connection (the ``keys revoke`` command's) is refused by every request
that starts that long after the revocation, proved on an injected clock. Unknown keys are
never remembered, so a key created a moment ago works on its first request."""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import aiohttp

from monitor.api.app import create_app
from monitor.api.context import TICKS
from monitor.config import ApiConfig, Config
from monitor.storage import connect
from monitor.storage.ratings import RatingsStore
from monitor.storage.webhooks import WebhookStore
from tests.readapi_support import population, registry_file, serve


def new_key() -> str:
    return "dpm_" + secrets.token_urlsafe(24)


async def test_a_revoked_key_stops_working_within_the_bound(storage_url: str,
                                                            tmp_path: Path) -> None:
    snaps, registry_text = population(5)
    registry = registry_file(tmp_path, registry_text)
    api_db, cli_db = await connect(storage_url), await connect(storage_url)
    try:
        await RatingsStore(api_db).migrate()
        await RatingsStore(cli_db).write_batch(snaps, [])
        config = Config(api=ApiConfig(key_cache_seconds=2.0),
                        registry=registry)
        app = create_app(config, api_db)
        ticks = [500.0]
        app[TICKS] = lambda: ticks[0]
        async with serve(app) as base, aiohttp.ClientSession() as session:
            async def status(key: str, path: str = "/rwa") -> int:
                async with session.get(base + path, headers={"x-api-key": key}) as resp:
                    await resp.read()
                    return resp.status

            key, other = new_key(), new_key()
            assert await status(key) == 401  # not created yet
            cli = WebhookStore(cli_db)
            await cli.create_api_key("a", key, time.time())
            await cli.create_api_key("b", other, time.time())
            assert await status(key) == 200  # a refusal is not remembered
            assert await status(other) == 200

            await cli.revoke_api_key(key[:12], time.time())
            ticks[0] += 1.999  # within the bound the verified key is still trusted ...
            assert await status(key) == 200
            ticks[0] += 0.001  # ... and from the bound on, looked up again: refused
            assert await status(key) == 401
            assert await status(key, "/webhooks/subscriptions") == 401  # on every route
            ticks[0] += 60.0
            assert await status(key) == 401  # and never remembered as valid again
            assert await status(other) == 200  # the other key is unaffected
    finally:
        await api_db.close()
        await cli_db.close()


async def test_zero_turns_the_cache_off(tmp_path: Path) -> None:
    _, registry_text = population(3)
    registry = registry_file(tmp_path, registry_text)
    db = await connect(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        await RatingsStore(db).migrate()
        config = Config(api=ApiConfig(key_cache_seconds=0.0),
                        registry=registry)
        app = create_app(config, db)
        app[TICKS] = lambda: 0.0  # the clock never moves: only a lookup can refuse
        async with serve(app) as base, aiohttp.ClientSession() as session:
            key = new_key()
            await WebhookStore(db).create_api_key("a", key, time.time())
            async with session.get(base + "/rwa", headers={"x-api-key": key}) as resp:
                assert resp.status == 200
            await WebhookStore(db).revoke_api_key(key[:12], time.time())
            async with session.get(base + "/rwa", headers={"x-api-key": key}) as resp:
                assert resp.status == 401
    finally:
        await db.close()
