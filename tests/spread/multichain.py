"""A USDC on three chains, built from the real March 2023 file (test helper).

Only ``eth`` is real. The other two chains are derived from it so that the spread has
something to measure: ``arb`` trails eth by three minutes (bridged liquidity reacts late)
and ``base`` goes quiet for 45 minutes in the middle of the depeg, so the stage has to
carry on without it. Written to a temporary directory with a registry that names the three
tokens one asset.
"""

from __future__ import annotations

import csv
from pathlib import Path

from tests.conftest import data_file

ETH = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
ARB = "0xaf88d065e77c8cc2239327c5edb3a432268e5831"
BASE = "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913"
KEYS = (f"eth:{ETH}", f"arb:{ARB}", f"base:{BASE}")

REGISTRY = f"""
[[token]]
chain = "eth"
address = "{ETH}"
symbol = "USDC"
asset = "usdc"

[[token]]
chain = "arb"
address = "{ARB}"
symbol = "USDC"
asset = "usdc"

[[token]]
chain = "base"
address = "{BASE}"
symbol = "USDC"
asset = "usdc"

[[token]]
chain = "eth"
address = "0xdac17f958d2ee523a2206206994597c13d831ec7"
symbol = "USDT"
asset = "usdt"
"""

QUIET_FROM, QUIET_TO = "2023-03-11T06:00", "2023-03-11T06:45"


def build(directory: Path, start: str = "2023-03-10T12", end: str = "2023-03-12T00"
          ) -> tuple[Path, list[Path]]:
    """(registry path, [eth.csv, arb.csv, base.csv]) for the window [start, end)."""
    source = data_file("ticks/usdc_2023-03_binanceus_1m.csv")
    with source.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if start <= r["ts"] < end]
    header = ["ts", "chain", "token", "symbol", "price_usd", "peg_usd", "slippage_bps"]
    files = []
    lagged = [None, None, None, *rows]
    for chain, token in (("eth", ETH), ("arb", ARB), ("base", BASE)):
        path = directory / f"usdc_{chain}.csv"
        with path.open("w", newline="") as fh:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(header)
            for i, row in enumerate(rows):
                price = row["price_usd"]
                if chain == "arb":
                    prior = lagged[i]
                    if prior is None:
                        continue
                    price = prior["price_usd"]
                if chain == "base" and QUIET_FROM <= row["ts"] < QUIET_TO:
                    continue
                w.writerow([row["ts"], chain, token, "USDC", price, "1", ""])
        files.append(path)
    registry = directory / "tokens.toml"
    registry.write_text(REGISTRY)
    return registry, files
