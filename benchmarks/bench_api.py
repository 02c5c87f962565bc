"""Read API throughput: GET /rwa and GET /rwa/{address} req/s and p50/p99 latency.

Seeds a store with N tokens (default 1,000, across the seven chains) and D days of
5-minute history (default 7: 2,016 points per token, ~2 M rows), plus a depeg episode on
every tenth token, then serves the real app from a separate process and loads it from
another separate process with a fixed number of concurrent connections. Runs on SQLite,
PostgreSQL or both::

    python benchmarks/bench_api.py --db both --seconds 10 --concurrency 16

The load tool is ``wrk`` when it is installed (Debian: ``apt-get install wrk``; one
thread, a Lua script that counts every non-200 answer), else an aiohttp client in its
own process (``--client aiohttp`` forces it); the output says which one ran. The
benchmark process itself only waits while a measurement runs.

PostgreSQL gets a throw-away database on --pg-url's server (created and dropped here).
The headline cases (``GET /rwa``, the default page, and ``GET /rwa/{address}``) run
``--rounds`` times each, interleaved with their limit: a bare aiohttp server (also in its
own process) answering every request with a body of the same size, so the ratio says
what the API costs over HTTP itself. The benchmark's key has its own high rate limit
(``api.key_rate_limits``), so the limiter runs as in production without answering 429.
Any non-200 or socket error fails the run.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
from api_load import Load, LoadTool, add_load_args
from api_servers import serve_app, serve_bare, server_process
from common import (
    add_backend_args,
    emit,
    fail_on_errors,
    machine_line,
    on_each_backend,
    show,
)

from monitor.chains import CHAINS
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
    from monitor.api.app import create_app
    from monitor.config import ApiConfig, Config, DeliveryConfig, KeyRateLimit, RegistryConfig

    async def main() -> None:
        db = await connect(url)
        # The key's own limit, far above what one machine sends: the limiter runs (as in
        # production) but never answers 429, so this measures the server.
        api = ApiConfig(key_rate_limits={"bench": KeyRateLimit(per_second=1e6,
                                                                burst=1_000_000)})
        # The webhook secrets' key beside the registry, in the run's temporary directory:
        # by default the app creates one in the user's data directory.
        delivery = DeliveryConfig(secret_key_file=str(Path(registry).with_name("secret-key")))
        config = Config(api=api, registry=RegistryConfig(path=registry), delivery=delivery)
        await serve_app(create_app(config, db), port)

    asyncio.run(main())


async def headline(kind: str, name: str, base: str, bare_base: str, paths: list[str],
                   size: int, tool: LoadTool, key: str,
                   args: argparse.Namespace) -> int:
    """``--rounds`` interleaved rounds of ``paths`` on the API and on the bare server;
    prints the figures and the BENCH-RESULT line; returns the errors seen."""
    errors = 0
    bare: list[Load] = []
    api: list[Load] = []
    for n in range(args.rounds):
        order = ("bare", "api") if n % 2 == 0 else ("api", "bare")
        for which in order:
            got = await tool.run(bare_base if which == "bare" else base, paths, args.seconds,
                                 args.concurrency, key)
            errors += got.errors
            (bare if which == "bare" else api).append(got)
            print(f"[{kind}] round {n + 1} {which:<4} {name:<26} {got.line()}", flush=True)
    print(show(f"[{kind}] bare server ({size:,} B body)", [b.rps for b in bare], "req/s"))
    print(show(f"[{kind}] {name}", [a.rps for a in api], "req/s"))
    print(show(f"[{kind}] {name} p50", [a.p50 * 1000 for a in api], "ms"))
    print(show(f"[{kind}] {name} p99", [a.p99 * 1000 for a in api], "ms"))
    ratio = statistics.median(a.rps for a in api) / statistics.median(b.rps for b in bare)
    print(f"[{kind}] {name} / bare server (medians): {ratio:.2f}", flush=True)
    p99 = statistics.median(a.p99 for a in api) * 1000
    worst_p99 = max(a.p99 for a in api) * 1000
    # The bare server's p99 beside the API's: on a shared machine both carry the
    # scheduler's stalls, which the API cannot be faster than.
    bare_p99 = statistics.median(b.p99 for b in bare) * 1000
    print(f"[{kind}] p99 medians: {name} {p99:.2f} ms, bare server {bare_p99:.2f} ms",
          flush=True)
    emit(f"`{name}`, {args.tokens:,} tokens ({kind}), {args.concurrency} connections",
         unit="req/s", limit_name="bare aiohttp server, same body size",
         limit=[b.rps for b in bare], project=[a.rps for a in api], ratio=ratio,
         target=">= 2,000 req/s, p99 < 20 ms",
         met=statistics.median(a.rps for a in api) >= 2000 and p99 < 20,
         note=(f"p50 median {statistics.median(a.p50 for a in api) * 1000:.2f} ms, p99 "
               f"median {p99:.2f} ms (worst {worst_p99:.2f}; bare server's {bare_p99:.2f});"
               f" load tool {tool.name}"))
    return errors


async def while_writing(url: str, tool: LoadTool, base: str, paths: list[str], key: str,
                        args: argparse.Namespace) -> tuple[Load, int]:
    """The load while another connection writes a new snapshot every ``--write-every``
    seconds, as the store writer does: every write moves the ratings version, so the
    cached bodies are rebuilt (the cost a live store adds to the hot path)."""
    db = await connect(url)
    store = RatingsStore(db)
    writes = 0

    async def writer() -> None:
        nonlocal writes
        while True:
            await asyncio.sleep(args.write_every)  # the write cadence, not a synchronisation
            writes += 1
            await store.write_batch([_snap(CHAINS[0], address(0), END + writes * STEP,
                                           10.0 + writes % 50, 1.0, full=True)], [])

    task = asyncio.ensure_future(writer())
    try:
        got = await tool.run(base, paths, args.seconds, args.concurrency, key)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await db.close()
    return got, writes


async def body_size(base: str, path: str, key: str) -> int:
    async with aiohttp.ClientSession(headers={"x-api-key": key}) as s, \
            s.get(base + path) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{path}: {resp.status} {await resp.text()}")
        return len(await resp.read())


async def run_one(kind: str, url: str, args: argparse.Namespace, tmp: Path,
                  tool: LoadTool) -> None:
    registry = tmp / f"tokens-{kind}.toml"
    took, key = await seed(url, args.tokens, args.days, registry)
    points = int(args.days * 86400 / STEP)
    print(f"[{kind}] seeded {args.tokens} tokens x {points} points "
          f"({args.tokens * points:,} rows) in {took:.1f}s", flush=True)
    async with server_process(_serve, url, str(registry)) as base:
        rnd = random.Random(2)
        # One token's detail for the headline (24 h: 288 points), the default window.
        detail = f"/rwa/{address(3)}?chain={CHAINS[3 % 7]}"
        headlines = {"GET /rwa": ["/rwa"], "GET /rwa/{address}": [detail]}
        cases = {
            "GET /rwa (chain+tier filter, mcap sort, page 3)": [
                f"/rwa?chain={c}&sort=market_cap_usd&page=3&pageSize=20" for c in CHAINS],
            "GET /rwa (q search, cursor mode)": [f"/rwa?q=token%20{n}&limit=50"
                                                 for n in range(1, 10)],
            "GET /rwa?pageSize=500 (the largest page)": ["/rwa?pageSize=500"],
            "GET /rwa/{address}?hours=24, 50 tokens": [
                f"/rwa/{address(i)}?chain={CHAINS[i % 7]}&hours=24"
                for i in rnd.sample(range(args.tokens), 50)],
            "GET /rwa/{address}?hours=168, 50 tokens": [
                f"/rwa/{address(i)}?chain={CHAINS[i % 7]}&hours=168"
                for i in rnd.sample(range(args.tokens), 50)],
        }
        total_errors = 0
        for name, paths in headlines.items():
            size = await body_size(base, paths[0], key)
            async with server_process(serve_bare, size) as bare_base:
                total_errors += await headline(kind, name, base, bare_base, paths, size, tool,
                                               key, args)
        # Before the cases below: their many cold builds of large bodies keep the server
        # busy for a while after their load stops, which would land on this one.
        got, writes = await while_writing(url, tool, base, ["/rwa"], key, args)
        total_errors += got.errors
        print(f"[{kind}] {'GET /rwa, a store write every ' + str(args.write_every) + ' s':<44}"
              f" {got.line()}  ({writes} writes: each one rebuilds the body)", flush=True)
        for name, paths in cases.items():
            size = await body_size(base, paths[0], key)
            got = await tool.run(base, paths, args.seconds, args.concurrency, key)
            total_errors += got.errors
            print(f"[{kind}] {name:<44} {got.line()}  body {size:,} B", flush=True)
        fail_on_errors(total_errors, f"the {kind} runs")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_backend_args(parser)
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--days", type=float, default=7.0)
    add_load_args(parser)
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds of each headline case and its limit")
    parser.add_argument("--write-every", type=float, default=0.5,
                        help="seconds between store writes in the case with writes")
    parser.add_argument("--client", choices=["auto", "wrk", "aiohttp"], default="auto",
                        help="load tool (auto: wrk when installed, else aiohttp)")
    args = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        tool = LoadTool(args.client, Path(tmp))
        print(f"python {sys.version.split()[0]}, {args.concurrency} concurrent connections, "
              f"{args.seconds:g}s per case; server in its own process; load tool: "
              f"{tool.describe()}", flush=True)
        try:
            await run_all(args, Path(tmp), tool)
        finally:
            tool.close()
    return 0


async def run_all(args: argparse.Namespace, tmp: Path, tool: LoadTool) -> None:
    async def run(kind: str, url: str) -> None:
        await run_one(kind, url, args, tmp, tool)

    await on_each_backend(args, tmp, run)

if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
