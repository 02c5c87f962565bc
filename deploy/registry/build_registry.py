#!/usr/bin/env python3
"""Build the pegged-token registry (a Token List with the peg extension) from public lists.

    python deploy/registry/build_registry.py [--out deploy/registry/pegged-tokens.tokenlist.json]

Fetches the public token lists below as npm packages (``npm pack``, the ordinary client, into
a temporary directory), keeps the tokens of the seven chains whose symbol the curated
``pegged-assets.toml`` names, merges entries found in several lists (first list wins for
name and decimals; every list is recorded in ``extensions.lists``), and attaches the
Chainlink feeds that ``@yodlpay/tokenlists``'s ``pricefeeds.json`` publishes per chain:
``priceFeed`` (the token's own TOKEN/USD feed) and ``pegFeed`` (the peg's CCY/USD or XAU/USD
feed). Every address is EIP-55 checksummed; an entry whose address is not an EVM address is
dropped. The output is deterministic for a given ``--timestamp``. Validate it with
``depeg-monitor registry check FILE``. See docs/registry.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eth_utils import to_checksum_address

HERE = Path(__file__).resolve().parent
CHAIN_IDS = {"eth": 1, "arb": 42161, "pol": 137, "opt": 10, "base": 8453, "bsc": 56,
             "linea": 59144}
CHAIN_BY_ID = {v: k for k, v in CHAIN_IDS.items()}

#: Issuers' own multi-chain tokens: the same asset on every chain, so the cross-chain spread
#: stage compares them (``extensions.asset``; docs/cross-chain-spread.md). Exact symbols
#: only: a look-alike symbol is not the same asset.
MULTICHAIN_ASSETS = {"USDC": "usdc", "USDT": "usdt", "DAI": "dai"}

#: (short code, npm package@version, files inside the package holding token lists), in
#: priority order: curated DEX lists first, the large aggregated list last.
LISTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("uniswap", "@uniswap/default-token-list@22.21.0",
     ("build/uniswap-default.tokenlist.json",)),
    ("sushiswap", "@sushiswap/default-token-list@43.3.0",
     ("build/sushiswap-default.tokenlist.json",)),
    ("quickswap", "quickswap-default-token-list@1.2.59",
     ("build/quickswap-default.tokenlist.json",)),
    ("superfluid", "@superfluid-finance/tokenlist@5.38.0",
     ("dist/superfluid.extended.tokenlist.json",)),
    ("yodl", "@yodlpay/tokenlists@0.8.40", ("dist/tokenlist-generated.json",)),
    ("sonarwatch", "@sonarwatch/token-lists@1.24.84",
     tuple(f"build/sonarwatch.{n}.tokenlist.json" for n in
           ("ethereum", "arbitrum", "polygon", "optimism", "base", "bnb", "linea"))),
)
FEEDS = ("yodl", "@yodlpay/tokenlists@0.8.40", "dist/pricefeeds.json")
#: Peg type -> the feed "path" of its peg/USD price in pricefeeds.json.
PEG_FEED_PATH = {"gold": "xau-usd", "silver": "xag-usd"}


def npm_unpack(spec: str, into: Path) -> Path:
    """``npm pack`` one package into ``into`` and unpack it; returns the package root."""
    out = subprocess.run(["npm", "pack", spec, "--pack-destination", str(into),
                          "--loglevel=error"], check=True, capture_output=True, text=True)
    tarball = into / out.stdout.strip().splitlines()[-1]
    root = into / tarball.name.removesuffix(".tgz")
    with tarfile.open(tarball) as tar:
        tar.extractall(root, filter="data")
    tarball.unlink()
    return root / "package"


def load_curated() -> tuple[dict[str, tuple[str, str]], set[str], set[str]]:
    data = tomllib.loads((HERE / "pegged-assets.toml").read_text(encoding="utf-8"))
    pegs: dict[str, tuple[str, str]] = {}
    for peg_type, entry in data.items():
        for symbol in entry["symbols"]:
            pegs[symbol.upper()] = (peg_type, entry["reference"])
    nav = data.get("nav", {})
    return pegs, {s.upper() for s in nav.get("vault_symbols", [])}, set(nav.get("vault_chains", []))


def checksummed(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) != 42 or not value.startswith("0x"):
        return None
    try:
        return str(to_checksum_address(value))
    except ValueError:
        return None


def clean_name(name: str, symbol: str) -> str:
    text = " ".join(str(name or symbol).split())[:60].strip()
    return text or symbol


def build(workdir: Path, timestamp: str) -> dict[str, Any]:
    pegs, vault_symbols, vault_chains = load_curated()
    packages = {spec: npm_unpack(spec, workdir) for _, spec, _ in LISTS}
    merged: dict[tuple[int, str], dict[str, Any]] = {}
    for code, spec, files in LISTS:
        for rel in files:
            doc = json.loads((packages[spec] / rel).read_text(encoding="utf-8"))
            for tok in doc.get("tokens", []):
                chain_id = tok.get("chainId")
                symbol = str(tok.get("symbol", "")).strip()
                if chain_id not in CHAIN_BY_ID or symbol.upper() not in pegs:
                    continue
                address = checksummed(tok.get("address"))
                decimals = tok.get("decimals")
                if address is None or not isinstance(decimals, int) or " " in symbol:
                    continue
                key = (chain_id, address.lower())
                if key in merged:
                    if code not in merged[key]["_lists"]:
                        merged[key]["_lists"].append(code)
                    continue
                merged[key] = {"chainId": chain_id, "address": address,
                               "name": clean_name(tok.get("name", ""), symbol),
                               "symbol": symbol[:20], "decimals": decimals, "_lists": [code]}
    feeds_doc = json.loads((npm_unpack(FEEDS[1], workdir) / FEEDS[2]).read_text())
    feeds = {(f["chainId"], f["path"]): checksummed(f["address"]) for f in feeds_doc
             if f.get("output") == "USD" and "path" in f}
    tokens = []
    for tok in merged.values():
        chain = CHAIN_BY_ID[tok["chainId"]]
        peg_type, reference = pegs[tok["symbol"].upper()]
        sources: dict[str, str] = {}
        own = feeds.get((tok["chainId"], f"{tok['symbol'].lower()}-usd"))
        if own:
            sources["priceFeed"] = own
        peg_path = PEG_FEED_PATH.get(peg_type, f"{peg_type}-usd")
        if peg_type not in ("usd", "nav", "other"):
            peg_feed = feeds.get((tok["chainId"], peg_path))
            if peg_feed:
                sources["pegFeed"] = peg_feed
        if peg_type == "nav" and tok["symbol"].upper() in vault_symbols and chain in vault_chains:
            sources["navVault"] = tok["address"]
        ext: dict[str, Any] = {"pegType": peg_type, "pegReference": reference,
                               "lists": ",".join(tok.pop("_lists"))[:42]}
        asset = MULTICHAIN_ASSETS.get(tok["symbol"])
        if asset:
            ext["asset"] = asset
        if sources:
            ext["sources"] = sources
        tok["extensions"] = ext
        tokens.append(tok)
    tokens.sort(key=lambda t: (list(CHAIN_IDS.values()).index(t["chainId"]),
                               t["symbol"].upper(), t["address"].lower()))
    return {
        "name": "Depeg Monitor Pegged Tokens",
        "timestamp": timestamp,
        "version": {"major": 1, "minor": 0, "patch": 0},
        "keywords": ["stablecoins", "pegged"],
        "tokens": tokens,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE / "pegged-tokens.tokenlist.json")
    parser.add_argument("--timestamp", default=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="depeg-registry-") as tmp:
        doc = build(Path(tmp), args.timestamp)
    args.out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    counts = Counter(CHAIN_BY_ID[t["chainId"]] for t in doc["tokens"])
    print(f"{args.out}: {len(doc['tokens'])} tokens: " +
          ", ".join(f"{c} {counts.get(c, 0)}" for c in CHAIN_IDS), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
