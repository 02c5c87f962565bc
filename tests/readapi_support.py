"""Hand-made rating snapshots and tier changes for the ratings store and read API tests."""

from __future__ import annotations

import asyncio
import random
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
from aiohttp import web

from monitor.api.context import TICKS
from monitor.chains import CHAINS
from monitor.config import RegistryConfig
from monitor.kafka.embedded import free_port
from monitor.records import (
    RatingSnapshot,
    TierChangeEvent,
)
from monitor.storage.webhooks import WebhookStore
from monitor.testing import rating_snapshot, tier_change

T0 = 1_678_500_000.0  # 2023-03-11T02:00:00Z, during the USDC depeg


def registry_file(folder: Path, text: str) -> RegistryConfig:
    """The ``[registry]`` section naming ``text`` written as ``folder/tokens.toml``."""
    path = folder / "tokens.toml"
    path.write_text(text)
    return RegistryConfig(path=str(path))


def snapshot(chain: str, token: str, ts: float, rating: float, tier: str,
             price: float = 1.0, peg: float = 1.0, symbol: str = "TKN") -> RatingSnapshot:
    return rating_snapshot(chain, token, ts, rating, tier, price=price, peg=peg, symbol=symbol)


def change(chain: str, token: str, ts: float, old: str, new: str, rating: float = 50.0,
           price: float = 1.0, symbol: str = "TKN") -> TierChangeEvent:
    return tier_change(chain, token, ts, old, new, rating=rating, price=price, symbol=symbol)


def story(chain: str, token: str, tiers: Iterable[tuple[str, float, float]], start: float = T0,
          step: float = 300.0) -> tuple[list[RatingSnapshot], list[TierChangeEvent]]:
    """Snapshots every ``step`` seconds from (tier, rating, price) triples, with the tier
    changes between consecutive ones."""
    snaps: list[RatingSnapshot] = []
    events: list[TierChangeEvent] = []
    prev = "ok"
    for i, (tier, rating, price) in enumerate(tiers):
        ts = start + i * step
        snaps.append(snapshot(chain, token, ts, rating, tier, price))
        if tier != prev:
            events.append(change(chain, token, ts, prev, tier, rating, price))
            prev = tier
    return snaps, events


@asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    """Run the real app on a free loopback port; yields its base URL."""
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def served_on_a_clock(app: web.Application, db: Any, start: float = 1000.0
                            ) -> AsyncIterator[tuple[str, aiohttp.ClientSession, list[float]]]:
    """Serve ``app`` with its monotonic clock injected (``ticks[0]``, from ``start``: a
    test steps it, nothing sleeps) and a client holding a real API key made on ``db``;
    yields (base URL, client session, ticks)."""
    ticks = [start]
    app[TICKS] = lambda: ticks[0]
    async with serve(app) as base, aiohttp.ClientSession(
            headers=await api_headers(db)) as session:
        yield base, session, ticks


async def read_bodies(session: aiohttp.ClientSession, base: str, paths: list[str]
                      ) -> list[bytes]:
    """The raw bodies of ``paths``, in order; each must be a 200 (a read cache's test
    compares bytes, so no decoding)."""
    out = []
    for path in paths:
        async with session.get(base + path) as resp:
            assert resp.status == 200, await resp.text()
            out.append(await resp.read())
    return out


async def past_the_bound(bodies: Callable[[], Awaitable[list[bytes]]], ticks: list[float],
                         before: list[bytes]) -> list[bytes]:
    """Step an app's injected clock (``ticks[0]``; ``api.ratings_check_seconds`` 0.1) over
    the bound of a store write just made, and return the bodies then. Within the interval
    the last version read is trusted, so the bodies are still ``before``; the next read
    notices the write (bodies are rebuilding); from twice the interval on, every body is
    built after the write."""
    ticks[0] += 0.099
    assert await bodies() == before
    ticks[0] += 0.001
    await bodies()
    ticks[0] += 0.1
    return await bodies()


#: A test's client for the read API: ``await get(path, **query)`` -> (status, JSON body).
Get = Callable[..., Awaitable[tuple[int, Any]]]


async def pages(get: Get, path: str, params: dict[str, Any], mode: str,
                size: int) -> AsyncIterator[dict[str, Any]]:
    """Every page of a list endpoint, followed as a client does: by page number
    (``mode="offset"``) or by the cursor the previous page gave; each answered 200."""
    page, cursor = 1, None
    for _ in range(10_000):
        query = dict(params)
        if mode == "offset":
            query.update(page=page, pageSize=size)
        else:
            query["limit"] = size
            if cursor:
                query["cursor"] = cursor
        status, body = await get(path, **query)
        assert status == 200, body
        yield body
        if not body["pagination"]["hasMore"]:
            return
        if mode == "offset":
            page += 1
        else:
            cursor = body["pagination"]["nextCursor"]
    raise AssertionError(f"{path} {params}: no last page after 10,000 pages")


def tier_for(rating: float, price: float) -> str:
    if price > 1.005:
        return "premium"
    return ("critical" if rating >= 80 else "warning" if rating >= 60
            else "watch" if rating >= 40 else "ok")


def population(n: int, seed: int = 7) -> tuple[list[RatingSnapshot], str]:
    """``n`` tokens across the seven chains and a registry TOML for most of them."""
    rnd = random.Random(seed)
    snaps: list[RatingSnapshot] = []
    registry: list[str] = []
    pegs = ["usd", "usd", "usd", "eur", "gold", "nav"]
    for i in range(n):
        chain = CHAINS[i % len(CHAINS)]
        address = f"0x{i + 1:040x}"
        rating = round(rnd.uniform(0, 100), 3)
        price = rnd.choice([1.0, 0.999, 0.98, 0.9, 0.4, 1.01, None])
        tier = tier_for(rating, price or 1.0)
        ts = T0 + rnd.randrange(0, 86400, 300)
        snap = snapshot(chain, address, ts, rating, tier, price or 1.0,
                        symbol=f"S{rnd.randrange(10**6):06d}")
        if price is None:
            snap = msgspec.structs.replace(snap, price_usd=None, deviation_pct=None)
        snaps.append(snap)
        if rnd.random() < 0.8:
            mcap = rnd.choice([None, round(rnd.uniform(1e5, 1e10), 2)])
            registry.append(
                f'[[token]]\nchain = "{chain}"\naddress = "{address}"\n'
                f'symbol = "R{i:04d}"\nname = "Token number {i}"\n'
                f'peg_type = "{rnd.choice(pegs)}"\n'
                + (f"market_cap_usd = {mcap}\n" if mcap is not None else ""))
    return snaps, "\n".join(registry)


async def wait_for(condition: Callable[[], Awaitable[bool]] | Callable[[], bool],
                   limit: float = 30.0) -> None:
    """Poll an eventual condition (a consumer catching up) with a deadline."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        result = condition()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


async def api_headers(db: Any) -> dict[str, str]:
    """``x-api-key`` with a real key made through the webhook storage (call after the app
    started: its startup migrates the key table)."""
    key = "dpm_" + secrets.token_urlsafe(24)
    await WebhookStore(db).create_api_key("tests", key, time.time())
    return {"x-api-key": key}
