"""Cost of the cross-chain spread: the stage alone, and replay with and without it.

    python benchmarks/bench_spread.py [ASSETS] [CHAINS] [HOURS]

Synthetic assets (default 50 assets x 3 chains, one tick per chain per minute, 24 h of
event time). Prints ticks/s through the pure stage, through the engine alone and through
the stage + gated engine (the replay path), and counts errors: spread observations that
differ when the chains are read one after another instead of merged by time (the daemon's
worst interleaving), which must be 0.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from common import fail_on_errors

from monitor.config import Config
from monitor.engine import Engine
from monitor.spread import AssetMap, SpreadStage
from monitor.spread.feed import SpreadFeed
from monitor.ticks import Tick, make_tick

CHAINS = ("eth", "arb", "base", "opt", "pol", "bsc", "linea")


def _constant(value: bool) -> Callable[[], bool]:
    """A ``caught_up`` that answers ``value``."""
    return lambda: value


def market(assets: int, chains: int, hours: float) -> tuple[AssetMap, list[Tick]]:
    rng = random.Random(1)
    asset_of: dict[str, str] = {}
    ticks: list[Tick] = []
    for a in range(assets):
        for c in CHAINS[:chains]:
            token = f"0x{a * 16 + CHAINS.index(c):040x}"
            asset_of[f"{c}:{token}"] = f"asset{a}"
            for minute in range(int(hours * 60)):
                ts = 1_700_000_000 + minute * 60 + rng.uniform(0, 59)
                ticks.append(make_tick(round(ts, 3), c, token, f"A{a}",
                                       f"{1 + rng.gauss(0, 0.001):.6f}", "1"))
    ticks.sort(key=lambda t: t.ts)
    return AssetMap(asset_of), ticks


def timed(label: str, n: int, fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    elapsed = time.perf_counter() - start
    print(f"{label:<38} {n / elapsed:>10,.0f} ticks/s  ({elapsed:.2f} s)")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Cost of the cross-chain spread stage, and replay with and without it "
                    "(synthetic assets, one tick per chain per minute).")
    parser.add_argument("assets", nargs="?", type=int, default=50, help="assets (default 50)")
    parser.add_argument("chains", nargs="?", type=int, default=3,
                        help=f"chains per asset, at most {len(CHAINS)} (default 3)")
    parser.add_argument("hours", nargs="?", type=float, default=24.0,
                        help="hours of event time (default 24)")
    args = parser.parse_args()
    if not 1 <= args.chains <= len(CHAINS):
        parser.error(f"chains must be 1..{len(CHAINS)}")
    assets, chains, hours = args.assets, args.chains, args.hours
    amap, ticks = market(assets, chains, hours)
    config = Config()
    n = len(ticks)
    print(f"{assets} assets x {chains} chains, {hours:g} h, {n:,} ticks")

    def new_stage() -> SpreadStage:
        s = config.spread
        return SpreadStage(amap, every=config.model.refresh_seconds,
                           price_max_age=s.price_max_age_seconds,
                           quiet_after=s.quiet_after_seconds)

    merged: list[Tick] = []
    timed("stage alone (time-merged)", n, lambda: _run_stage(new_stage(), ticks, merged))
    timed("engine alone (no spread)", n,
          lambda: _run_engine(Engine(config.model, snapshots=False), ticks))
    feed = SpreadFeed(config, snapshots=False, assets=amap)
    timed("stage + gated engine (replay path)", n, lambda: _run_feed(feed, ticks))

    by_chain = sorted(ticks, key=lambda t: (t.chain, t.ts))
    other: list[Tick] = []
    s2 = new_stage()
    for i, t in enumerate(by_chain):
        other.extend(s2.process(t, _constant(i == n - 1)))
    errors = len(set(_key(merged)) ^ set(_key(other)))
    print(f"observations: {len(merged):,}; differing when read chain by chain: {errors}")
    fail_on_errors(errors, "the chain-by-chain read")


def _key(ticks: list[Tick]) -> list[tuple[float, str, float | None, int | None]]:
    return [(t.ts, t.key, t.cross_chain_spread_bps, t.cross_chain_chains) for t in ticks]


def _run_stage(stage: SpreadStage, ticks: list[Tick], out: list[Tick]) -> None:
    for t in ticks:
        out.extend(stage.process(t))


def _run_engine(engine: Engine, ticks: list[Tick]) -> None:
    for t in ticks:
        engine.process(t)


def _run_feed(feed: SpreadFeed, ticks: list[Tick]) -> None:
    for t in ticks:
        feed.process(t)


if __name__ == "__main__":
    main()
