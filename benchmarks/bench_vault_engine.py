"""Vault facts per second through the vault engine (decode + validate + tags + rating +
record encoding), counting errors, plus the cost of a depeg change re-rating its holders.

    python benchmarks/bench_vault_engine.py [VAULTS] [UPDATES_PER_VAULT]

Input: synthetic fact records (producers.vault_synthetic, 10,000 vaults by default) encoded
as they travel on vaults.facts. An "error" is a record the engine refused (BadFacts) or an
exception out of the engine; both must be 0. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import tracemalloc

from common import fail_on_errors

from monitor.vaults.config import VaultsConfig
from monitor.vaults.depeg_link import DepegChange
from monitor.vaults.engine import VaultEngine
from monitor.vaults.facts import BadFacts, decode_facts, encode_update
from monitor.vaults.records import encode_rating
from producers.vault_synthetic import generate_facts, make_vaults


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Vault facts per second through the vault engine, counting errors, and "
                    "the cost of a depeg re-rating every holder of the token.")
    parser.add_argument("vaults", nargs="?", type=int, default=10_000,
                        help="synthetic vaults (default 10,000)")
    parser.add_argument("updates_per_vault", nargs="?", type=int, default=5,
                        help="fact records per vault, an hour apart (default 5)")
    args = parser.parse_args()
    if args.vaults < 1 or args.updates_per_vault < 1:
        parser.error("vaults and updates_per_vault must be at least 1")
    vaults, per_vault = args.vaults, args.updates_per_vault
    specs = make_vaults(vaults, seed=1, tokens=40)
    raw = [encode_update(u) for u in generate_facts(
        specs, seed=1, start=1_700_000_000.0, interval=3600.0,
        duration=3600.0 * (per_vault - 1))]
    print(f"machine: {platform.machine()}, {platform.python_implementation()} "
          f"{platform.python_version()}, {platform.system()}")
    print(f"input: {len(raw):,} fact records for {vaults:,} vaults "
          f"({sum(map(len, raw)) / len(raw):.0f} bytes each on average)")
    best = best_cpu = float("inf")
    for _ in range(3):
        errors = records = 0
        engine = VaultEngine(VaultsConfig())
        started = time.perf_counter()
        cpu = time.process_time()
        for value in raw:
            try:
                for record in engine.process(decode_facts(value)):
                    encode_rating(record)  # the bytes the daemon publishes
                    records += 1
            except (BadFacts, Exception):  # counted, never hidden
                errors += 1
        best = min(best, time.perf_counter() - started)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    print(f"facts through the engine:  {len(raw) / best:10,.0f} facts/s wall (best of 3; "
          f"decode, validate, tags, rating, records encoded)")
    print(f"                           {len(raw) / best_cpu:10,.0f} facts per CPU second "
          f"(what one core does when the machine is shared)")
    print(f"load average now:          {os.getloadavg()[0]:10.1f}")
    print(f"rating records written:    {records:10,}")
    print(f"errors:                    {errors:10,}")
    fail_on_errors(errors, "the vault engine runs")
    # Memory of the vault states alone (one full fact record per vault).
    tracemalloc.start()
    sized = VaultEngine(VaultsConfig())
    for value in raw[:vaults]:
        sized.process(decode_facts(value))
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"engine state:              {current / vaults / 1024:10.1f} KB per vault")

    # A depeg of a widely held token: every holder re-rated.
    holders: dict[str, int] = {}
    for spec in specs:
        if spec.underlying is not None:
            key = f"{spec.chain}:{spec.underlying.address}"
            holders[key] = holders.get(key, 0) + 1
    token = max(holders, key=lambda k: holders[k])
    chain, address = token.split(":")
    started = time.perf_counter()
    rerated = engine.on_depeg(DepegChange(1_800_000_000.0, chain, address, "critical"))
    took = time.perf_counter() - started
    print(f"depeg re-rating:           {holders[token]:,} holders, {len(rerated):,} records in "
          f"{took * 1000:.1f} ms")


if __name__ == "__main__":
    main()
