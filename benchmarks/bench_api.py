"""Read API throughput: GET /rwa and GET /rwa/{address} req/s and p99 latency.

Seeds a store with N tokens (default 1,000, across the seven chains) and D days of
5-minute history (default 7: 2,016 points per token, ~2 M rows), plus a depeg episode on
every tenth token, then serves the real app from a separate process and hammers it from
this one with a fixed number of concurrent clients. Runs on SQLite, PostgreSQL or both::

    python benchmarks/bench_api.py --db both --seconds 10 --concurrency 16

PostgreSQL gets a throw-away database on --pg-url's server (created and dropped here).
The headline case (``GET /rwa``, the default page) runs ``--rounds`` times interleaved
with its limit: a bare aiohttp server (also in its own process) answering every request
with a body of the same size, so the ratio says what the API costs over HTTP itself.
The benchmark's key has its own high rate limit (``api.key_rate_limits``), so the
limiter runs as in production without answering 429. Any non-200 fails the run.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
import asyncpg
from common import emit, fail_on_errors, machine_line, show

from monitor.chains import CHAINS
from monitor.kafka.embedded import free_port
from monitor.records import (
    RatingSnapshot,
    TierChangeEvent,
)
from monitor.storage import connect
from monitor.storage.ratings import RatingsStore
from monitor.storage.webhooks import WebhookStore, migrate_webhooks
from monitor.testing import rating_snapshot, tier_change

STEP = 300.0
END = 1_700_000_100.0 - (1_700_000_100.0 % STEP)


def address(i: int) -> str:
    return f"0x{i + 1:040x}"


def _snap(chain: str, token: str, ts: float, rating: float, price: float,
          full: bool) -> RatingSnapshot:
    return rating_snapshot(chain, token, ts, rating, price=price, symbol="SYM", detail=full)


def _event(chain: str, token: str, ts: float, old: str, new: str) -> TierChangeEvent:
    return tier_change(chain, token, ts, old, new, rating=85.0, price=0.92, symbol="SYM")


async def seed(url: str, tokens: int, days: int, registry: Path) -> tuple[float, str]:
    """Fill the store; returns the time it took and an API key for the requests."""
    rnd = random.Random(1)
    points = int(days * 86400 / STEP)
    db = await connect(url)
    store = RatingsStore(db)
    await store.migrate()
    started = time.perf_counter()
    lines = []
    per_batch = max(1, 20_000 // points)
    for first in range(0, tokens, per_batch):
        snaps: list[RatingSnapshot] = []
        events: list[TierChangeEvent] = []
        for i in range(first, min(tokens, first + per_batch)):
            chain, token = CHAINS[i % len(CHAINS)], address(i)
            base = rnd.uniform(0, 35)
            depeg = i % 10 == 0
            for p in range(points):
                ts = END - (points - 1 - p) * STEP
                bad = depeg and points // 2 <= p < points // 2 + 36
                rating = 85.0 if bad else base
                snaps.append(_snap(chain, token, ts, rating, 0.92 if bad else 1.0,
                                   full=p == points - 1))
            if depeg:
                t0 = END - (points - 1 - points // 2) * STEP
                events += [_event(chain, token, t0, "ok", "critical"),
                           _event(chain, token, t0 + 36 * STEP, "critical", "ok")]
            lines.append(f'[[token]]\nchain = "{chain}"\naddress = "{token}"\n'
                         f'symbol = "T{i}"\nname = "Token {i}"\n'
                         f"market_cap_usd = {rnd.uniform(1e5, 1e10):.2f}\n")
        await store.write_batch(snaps, events)
    registry.write_text("\n".join(lines))  # noqa: ASYNC240 - once, before serving
    took = time.perf_counter() - started
    await migrate_webhooks(db)  # the API key table
    key = "dpm_" + uuid.uuid4().hex
    await WebhookStore(db).create_api_key("bench", key, time.time())
    await db.close()
    return took, key


def _serve(url: str, registry: str, port: int) -> None:
    from aiohttp import web

    from monitor.api.app import create_app
    from monitor.config import ApiConfig, Config, KeyRateLimit, RegistryConfig

    async def main() -> None:
        db = await connect(url)
        # The key's own limit, far above what one machine sends: the limiter runs (as in
        # production) but never answers 429, so this measures the server.
        api = ApiConfig(key_rate_limits={"bench": KeyRateLimit(per_second=1e6,
                                                                burst=1_000_000)})
        app = create_app(Config(api=api, registry=RegistryConfig(path=registry)), db)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        await asyncio.Event().wait()

    asyncio.run(main())


def _serve_bare(size: int, port: int) -> None:
    """The limit: the same HTTP stack answering every GET with ``size`` fixed bytes."""
    from aiohttp import web

    body = b"x" * size

    async def handler(_request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        await asyncio.Event().wait()

    asyncio.run(main())


async def hammer(base: str, paths: list[str], seconds: float, concurrency: int,
                 key: str) -> tuple[float, float, float, int]:
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def client(n: int, session: aiohttp.ClientSession) -> None:
        nonlocal errors
        k = n
        while time.perf_counter() < deadline:
            path = paths[k % len(paths)]
            k += concurrency
            t = time.perf_counter()
            try:
                async with session.get(base + path) as resp:
                    await resp.read()
                    if resp.status != 200:
                        errors += 1
            except aiohttp.ClientError:
                errors += 1
            latencies.append(time.perf_counter() - t)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency),
                                     headers={"x-api-key": key}) as s:
        start = time.perf_counter()
        await asyncio.gather(*(client(n, s) for n in range(concurrency)))
        elapsed = time.perf_counter() - start
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return len(latencies) / elapsed, statistics.median(latencies), p99, errors


async def wait_up(base: str) -> None:
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as s:
        while time.monotonic() < deadline:
            try:
                async with s.get(base + "/openapi.json") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError("server did not come up")


async def run_one(kind: str, url: str, args: argparse.Namespace, tmp: Path) -> None:
    registry = tmp / f"tokens-{kind}.toml"
    took, key = await seed(url, args.tokens, args.days, registry)
    points = int(args.days * 86400 / STEP)
    print(f"[{kind}] seeded {args.tokens} tokens x {points} points "
          f"({args.tokens * points:,} rows) in {took:.1f}s", flush=True)
    port = free_port()
    proc = mp.get_context("spawn").Process(target=_serve, args=(url, str(registry), port),
                                           daemon=True)
    proc.start()
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_up(base)
        rnd = random.Random(2)
        cases = {
            "GET /rwa (default page of 50)": ["/rwa"],
            "GET /rwa (chain+tier filter, mcap sort, page 3)": [
                f"/rwa?chain={c}&sort=market_cap_usd&page=3&pageSize=20" for c in CHAINS],
            "GET /rwa (q search, cursor mode)": [f"/rwa?q=token%20{n}&limit=50"
                                                 for n in range(1, 10)],
            "GET /rwa/{address}?hours=24 (288 points)": [
                f"/rwa/{address(i)}?chain={CHAINS[i % 7]}&hours=24"
                for i in rnd.sample(range(args.tokens), 50)],
            "GET /rwa/{address}?hours=168 (2,016 points)": [
                f"/rwa/{address(i)}?chain={CHAINS[i % 7]}&hours=168"
                for i in rnd.sample(range(args.tokens), 50)],
        }
        total_errors = 0
        async with aiohttp.ClientSession(headers={"x-api-key": key}) as s:
            async with s.get(base + "/rwa") as resp:
                size = len(await resp.read())
        bare_port = free_port()
        bare_proc = mp.get_context("spawn").Process(target=_serve_bare,
                                                    args=(size, bare_port), daemon=True)
        bare_proc.start()
        bare_base = f"http://127.0.0.1:{bare_port}"
        try:
            await wait_up(bare_base)
            bare_rps: list[float] = []
            api_rps: list[float] = []
            api_p99: list[float] = []
            for n in range(args.rounds):
                order = ("bare", "api") if n % 2 == 0 else ("api", "bare")
                for which in order:
                    rps, median, p99, errors = await hammer(
                        bare_base if which == "bare" else base, ["/rwa"], args.seconds,
                        args.concurrency, key)
                    total_errors += errors
                    (bare_rps if which == "bare" else api_rps).append(rps)
                    if which == "api":
                        api_p99.append(p99 * 1000)
                    print(f"[{kind}] round {n + 1} {which:<4} GET /rwa {rps:8.1f} req/s  median"
                          f" {median * 1000:6.1f} ms  p99 {p99 * 1000:6.1f} ms  non-200 {errors}",
                          flush=True)
        finally:
            bare_proc.terminate()
            bare_proc.join(10)
        print(show(f"[{kind}] bare server ({size} B body)", bare_rps, "req/s"))
        print(show(f"[{kind}] GET /rwa", api_rps, "req/s"))
        print(show(f"[{kind}] GET /rwa p99", api_p99, "ms"))
        ratio = statistics.median(api_rps) / statistics.median(bare_rps)
        print(f"[{kind}] GET /rwa / bare server (medians): {ratio:.2f}")
        emit(f"`GET /rwa`, {args.tokens:,} tokens ({kind}), {args.concurrency} clients",
             unit="req/s", limit_name="bare aiohttp server, same body size", limit=bare_rps,
             project=api_rps, ratio=ratio, target=">= 2,000 req/s, p99 < 20 ms",
             met=statistics.median(api_rps) >= 2000 and max(api_p99) < 20,
             note=f"p99 median {statistics.median(api_p99):.1f} ms")
        for name, paths in cases.items():
            rps, median, p99, errors = await hammer(base, paths, args.seconds, args.concurrency,
                                                     key)
            total_errors += errors
            print(f"[{kind}] {name:<48} {rps:8.1f} req/s  median {median * 1000:7.1f} ms"
                  f"  p99 {p99 * 1000:7.1f} ms  non-200 {errors}", flush=True)
        fail_on_errors(total_errors, f"the {kind} runs")
    finally:
        proc.terminate()
        proc.join(10)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved GET /rwa rounds")
    args = parser.parse_args()
    print(machine_line())
    print(f"python {sys.version.split()[0]}, {args.concurrency} concurrent clients, "
          f"{args.seconds:g}s per case; server in its own process", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if args.db in ("sqlite", "both"):
            await run_one("sqlite", f"sqlite:///{tmp}/bench.db", args, Path(tmp))
        if args.db in ("postgresql", "both"):
            name = f"depeg_bench_{uuid.uuid4().hex[:10]}"
            admin = await asyncpg.connect(args.pg_url)
            await admin.execute(f'CREATE DATABASE "{name}"')
            await admin.close()
            try:
                await run_one("postgresql", args.pg_url.rsplit("/", 1)[0] + f"/{name}", args,
                              Path(tmp))
            finally:
                admin = await asyncpg.connect(args.pg_url)
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                await admin.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
