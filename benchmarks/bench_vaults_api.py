"""Vault read API throughput: GET /vaults (E4) and GET /vaults/{address} (E5) req/s.

The routes keep encoded bodies while the store is unchanged (monitor/api/readcache.py), so
the cases that repeat a few queries measure that cache; the two "cache miss" cases never
repeat a query and measure the queries and encoding behind it.

Seeds a store with N synthetic vaults (default 10,000; the ``produce vaults simulate``
generator) rated by the real vault engine, plus a 90-day-style history of rating records
(the engine's records over a few fact rounds), then serves the real app from a separate
process and hammers it with a fixed number of concurrent clients. Every non-200 answer is
counted and printed. Runs on SQLite, PostgreSQL or both::

    python benchmarks/bench_vaults_api.py --db both --vaults 10000 --seconds 10

PostgreSQL gets a throw-away database on --pg-url's server (created and dropped here).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
import uuid

from api_load import add_load_args, hammer
from api_servers import serve_app, server_process
from common import add_backend_args, on_each_backend

from consumers.vault_store import fold_facts, rating_row
from monitor.storage import connect
from monitor.storage.vaults import FactsUpdate, VaultStore
from monitor.storage.webhooks import WebhookStore, migrate_webhooks
from monitor.vaults.config import VaultsConfig
from monitor.vaults.engine import VaultEngine
from monitor.vaults.facts import FactUpdate
from monitor.vaults.records import encode_rating
from producers.vault_synthetic import generate_facts, make_vaults

START = 1_700_000_000.0


async def seed(url: str, vaults: int, rounds: int) -> tuple[float, str, list[tuple[str, str]]]:
    """Fill the store through the store writer's own write path; returns the time it took,
    an API key and the (chain, address) of every vault."""
    specs = make_vaults(vaults, seed=1)
    engine = VaultEngine(VaultsConfig())
    db = await connect(url)
    store = VaultStore(db)
    await store.migrate()
    started = time.perf_counter()
    batch: list[FactsUpdate[FactUpdate]] = []
    records = 0

    async def flush(final: bool = False) -> None:
        nonlocal batch, records
        if len(batch) < 5000 and not (final and batch):
            return
        ratings = []
        for f in batch:
            for r in engine.process(f.update):
                ratings.append(rating_row(r, encode_rating(r)))
        records += len(ratings)
        await store.write_batch(batch, fold_facts, ratings)
        batch = []

    for update in generate_facts(specs, seed=1, start=START, interval=3600.0,
                                 duration=3600.0 * rounds):
        batch.append(FactsUpdate(update.chain, update.vault, update.ts, update))
        await flush()
    await flush(final=True)
    took = time.perf_counter() - started
    await migrate_webhooks(db)  # the API key table
    key = "dpm_" + uuid.uuid4().hex
    await WebhookStore(db).create_api_key("bench", key, time.time())
    await db.close()
    print(f"  {records:,} rating records from {vaults:,} vaults x {rounds + 1} fact rounds",
          flush=True)
    return took, key, [(v.chain, v.address) for v in specs]


def _serve(url: str, port: int) -> None:
    from monitor.api.app import create_app
    from monitor.config import ApiConfig, Config, DeliveryConfig

    async def main(tmp: str) -> None:
        db = await connect(url)
        # No per-key rate limit: this measures the server, not the limiter's 429s. The
        # webhook secrets' key in a temporary directory, not the user's data directory.
        config = Config(api=ApiConfig(rate_limit_per_second=0),
                        delivery=DeliveryConfig(secret_key_file=os.path.join(tmp, "secret-key")))
        await serve_app(create_app(config, db), port)

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(tmp))


async def run_one(kind: str, url: str, args: argparse.Namespace) -> None:
    took, key, vaults = await seed(url, args.vaults, args.rounds)
    print(f"[{kind}] seeded {args.vaults:,} vaults in {took:.1f}s", flush=True)
    async with server_process(_serve, url) as base:
        rnd = random.Random(2)
        cases = {
            "GET /vaults (default: page 1 of 50, score_desc)": ["/vaults"],
            "GET /vaults (chain+tier filter, tvl_desc, page 3)": [
                f"/vaults?chain={c}&tier={t}&sort=tvl_desc&page=3&pageSize=20"
                for c in ("eth", "arb", "base") for t in ("low", "medium", "high")],
            "GET /vaults (riskFlags all + minTvl, apy_desc)": [
                "/vaults?riskFlags=vault-no-timelock,vault-eoa-owner&riskFlagsMode=all"
                "&minTvl=100000&sort=apy_desc"],
            "GET /vaults (q search, name_asc, cursor mode)": [
                f"/vaults?q=vault%20{n}&sort=name_asc&limit=100" for n in range(1, 10)],
            "GET /vaults (pageSize 500, page 10)": ["/vaults?pageSize=500&page=10"],
            "GET /vaults/{address}?chain= (E5)": [
                f"/vaults/{a}?chain={c}" for c, a in rnd.sample(vaults, 50)],
            # The routes serve repeated queries from a read cache (monitor/api/readcache.py):
            # these two never repeat one within a run, so every request is built anew.
            "GET /vaults (every request a cache miss: distinct minScore)": [
                f"/vaults?minScore={i / 1000:.3f}" for i in range(50_000)],
            "GET /vaults/{address}?chain= (E5, every request a cache miss)": [
                f"/vaults/{a}?chain={c}" for c, a in rnd.sample(vaults, len(vaults))],
        }
        for name, paths in cases.items():
            rps, median, p99, _, errors = await hammer(base, paths, args.seconds,
                                                        args.concurrency, key)
            print(f"[{kind}] {name:<62} {rps:8.1f} req/s  median {median * 1000:7.1f} ms"
                  f"  p99 {p99 * 1000:7.1f} ms  non-200 {errors}", flush=True)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_backend_args(parser)
    parser.add_argument("--vaults", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3,
                        help="fact update rounds after the first full record (history)")
    add_load_args(parser)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {args.concurrency} concurrent clients, "
          f"{args.seconds:g}s per case; server in its own process", flush=True)
    async def run(kind: str, url: str) -> None:
        await run_one(kind, url, args)

    with tempfile.TemporaryDirectory() as tmp:
        await on_each_backend(args, tmp, run)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
