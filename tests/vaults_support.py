"""A hand-made vault population for the vault store and E4/E5 tests.

Values repeat on purpose (rounded TVLs, shared names, unrated vaults, missing facts) so
ties and missing sort keys are exercised, not only distinct values.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from monitor.api.vaults.catalogue import (
    CONTRACT_TYPES,
    PROTOCOLS,
    TAG_KEYS,
    UNDERLYING_RISKS,
    VAULT_CHAINS,
)
from monitor.storage.vaults import FactsUpdate, RatingRow, VaultStore
from monitor.timefmt import format_ts, parse_ts
from monitor.vaults.config import VaultsConfig
from monitor.vaults.envelope import risk_envelope
from monitor.vaults.records import Contribution, VaultRating, encode_rating
from monitor.vaults.verdict import tier_for, verdict_for

T0 = 1_678_500_000.0
USDC_ETH = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
UNDERLYINGS = [("USDC", USDC_ETH), ("USDT", "0xdac17f958d2ee523a2206206994597c13d831ec7"),
               ("WETH", "0xc02aaa39a083c0d2ce3d14b6a9ebbf45ba48be5b"), (None, None)]


def vault_address(i: int) -> str:
    return f"0x{0xa01 + i:040x}"


def rating_record(chain: str, vault: str, ts: float, rating: int | None,
                  tags: list[str], attention: bool) -> VaultRating:
    """A real ``vaults.ratings`` record built with the engine's tier, verdict and envelope
    functions (the rating and tags are chosen by the test, not computed from facts)."""
    tags = sorted(tags)
    stamp = format_ts(ts)
    points = {t: 5.0 for t in tags}
    return VaultRating(
        ts=stamp, chain=chain, vault=vault, rating=rating, tier=tier_for(rating),
        verdict=verdict_for(rating, tags, VaultsConfig().blocking_tags), tags=tags,
        attention_needed=attention,
        risk=risk_envelope(rating, tags, points, dict.fromkeys(tags, stamp)),
        contributions=[Contribution("vault_liquidity_risk", "Liquidity & Withdrawal",
                                    float(rating or 0), tags, {})],
        floor=None, explanation=f"{rating} because the test said so", known_facts=10,
        underlying_depeg_tier=None)


def rating_row(record: VaultRating) -> RatingRow:
    return RatingRow(record.chain, record.vault, parse_ts(record.ts), record.rating,
                     record.tier, record.verdict, tuple(record.tags), record.attention_needed,
                     encode_rating(record))


@dataclass
class Population:
    facts: list[dict[str, Any]]
    records: list[VaultRating]

    def expected(self) -> list[dict[str, Any]]:
        """One flat row per vault: what the brute-force filters and sorts look at."""
        return [{**f, **msgspec.to_builtins(r), "address": f["vault"]}
                for f, r in zip(self.facts, self.records, strict=True)]


def population(n: int, seed: int = 11) -> Population:
    rnd = random.Random(seed)
    facts: list[dict[str, Any]] = []
    records: list[VaultRating] = []
    for i in range(n):
        chain = VAULT_CHAINS[i % len(VAULT_CHAINS)]
        vault = vault_address(i)
        symbol, underlying = rnd.choice(UNDERLYINGS)
        f: dict[str, Any] = {
            "ts": T0 + i, "chain": chain, "vault": vault,
            "name": rnd.choice([f"Vault {rnd.randrange(60):02d}", None, "Alpha", "beta"]),
            "symbol": rnd.choice([f"v{rnd.randrange(99)}", None]),
            "protocol": rnd.choice([*PROTOCOLS, None]),
            "contract_type": rnd.choice([*CONTRACT_TYPES, None]),
            "underlying_symbol": symbol,
            "underlying_address": underlying if chain == "eth" or symbol is None
            else vault_address(10_000 + i),
            "underlying_risk": rnd.choice([*UNDERLYING_RISKS, None]),
            "tvl_usd": rnd.choice([None, 1e6, 5e6, round(rnd.uniform(0, 1e9), 2)]),
            "apy_pct": rnd.choice([None, 4.0, round(rnd.uniform(0, 30), 3)]),
            "looping_rate": rnd.choice([None, 0.0, 0.5, round(rnd.random(), 4)]),
            "looping_markets": [{"market": "m1", "rate": 0.1}] if i % 5 == 0 else [],
            "code_findings": [{"id": "F-1", "severity": "low"}] if i % 7 == 0 else [],
            "lending_market": {"curator": "c1"} if i % 3 == 0 else None,
        }
        rating = rnd.choice([None, 50, rnd.randrange(101)])
        tags = rnd.sample(TAG_KEYS, rnd.choice([0, 0, 1, 2, 4]))
        ts = T0 + rnd.randrange(0, 86400, 60)
        facts.append(f)
        records.append(rating_record(chain, vault, ts, rating, tags, rnd.random() < 0.2))
    return Population(facts, records)


def replace_facts(current: Mapping[str, Any] | None, updates: Sequence[Mapping[str, Any]]
                  ) -> Mapping[str, Any]:
    """Test stand-in for the engine's merge where every record carries complete facts."""
    return dict(updates[-1])


async def load(store: VaultStore, pop: Population) -> None:
    await store.write_batch(
        [FactsUpdate(f["chain"], f["vault"], f["ts"], f) for f in pop.facts], replace_facts,
        [rating_row(r) for r in pop.records])
