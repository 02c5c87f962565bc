"""Synthetic ERC-4626 vaults: a seeded, pure fact generator (no clock, no I/O).

Vaults are spread over the spec's 8 protocol labels, 4 contract types and 6 v2 chains. Each
starts with a full fact record, then gets partial updates (TVL, APY, utilisation, events,
share price) every ``interval`` seconds of event time. Some have incidents:

- ``redemption``: redemptions close for a while, then reopen (a blocking tag);
- ``bad_debt``: bad debt appears in the lending market, then is written off;
- ``depeg``: the underlying is one of the synthetic pegged tokens of ``produce simulate``
  (same ``--seed``/``--tokens``), so the depeg monitor's tier changes re-rate the vault live.

Every vault's underlying is a synthetic token on its chain when one exists, so running both
simulators with the same seed links them. Same seed, same facts.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from monitor.vaults.facts import (
    CONTRACT_TYPES,
    OWNER_KINDS,
    PROTOCOL_LABELS,
    FactsMessage,
    FactUpdate,
    make_update,
)

from .synthetic import TokenSpec, make_tokens

VAULT_CHAINS: Final = ("eth", "arb", "base", "opt", "pol", "bsc")
INCIDENTS: Final = ("none", "redemption", "bad_debt", "depeg")
#: After the first four vaults (one of each), most have no incident of their own.
INCIDENT_WEIGHTS: Final = (80, 7, 7, 6)
DAY: Final = 86400.0


@dataclass(frozen=True, slots=True)
class VaultSpec:
    index: int
    chain: str
    address: str
    name: str
    protocol: str
    contract_type: str
    underlying: TokenSpec | None
    incident: str
    tvl_usd: float
    apy_pct: float
    owner_kind: str
    timelock_seconds: float
    age_days: float
    #: Event offset (seconds from start) where the incident begins, and how long it lasts.
    incident_at: float
    incident_for: float


def _address(seed: int, index: int) -> str:
    return "0x" + hashlib.sha256(f"vault:{seed}:{index}".encode()).hexdigest()[:40]


def make_vaults(count: int, seed: int, tokens: int = 10,
                first_incident_within: float = 6 * 3600) -> list[VaultSpec]:
    rng = random.Random(f"vaults:{seed}")
    pegged = make_tokens(tokens, seed) if tokens > 0 else []
    vaults = []
    for i in range(count):
        chain = VAULT_CHAINS[i % len(VAULT_CHAINS)]
        on_chain = [t for t in pegged if t.chain == chain]
        incident = INCIDENTS[i] if i < len(INCIDENTS) else rng.choices(
            INCIDENTS, INCIDENT_WEIGHTS)[0]
        if incident == "depeg":
            # Prefer a token whose scenario moves off peg, so the link shows.
            moving = [t for t in pegged if t.scenario in ("depeg", "collapse")]
            on_chain = moving or on_chain
        underlying = rng.choice(on_chain) if on_chain else None
        if incident == "depeg" and underlying is not None:
            chain = underlying.chain if underlying.chain in VAULT_CHAINS else chain
        vaults.append(VaultSpec(
            index=i, chain=chain, address=_address(seed, i),
            name=f"Synthetic Vault {i}",
            protocol=PROTOCOL_LABELS[i % len(PROTOCOL_LABELS)],
            contract_type=CONTRACT_TYPES[(i // len(PROTOCOL_LABELS)) % len(CONTRACT_TYPES)],
            underlying=underlying, incident=incident,
            tvl_usd=10 ** rng.uniform(4, 9), apy_pct=round(rng.uniform(0.5, 15), 2),
            owner_kind=rng.choices(OWNER_KINDS, (15, 45, 20, 15, 5))[0],
            timelock_seconds=rng.choice((0.0, 3600.0, 86400.0, 172800.0, 604800.0)),
            age_days=rng.uniform(5, 1500),
            incident_at=rng.uniform(600, first_incident_within),
            incident_for=rng.uniform(2 * 3600, 12 * 3600),
        ))
    return vaults


def _initial(v: VaultSpec, start: float, rng: random.Random) -> dict[str, Any]:
    u = v.underlying
    return {
        "name": v.name, "symbol": f"sv{v.index}", "protocol": v.protocol,
        "contract_type": v.contract_type,
        "underlying_symbol": u.symbol if u else "WETH",
        "underlying_address": u.address if u else None,
        "underlying_risk": "battle_tested" if u and u.peg_kind == "USD" else rng.choice(
            ("medium_risk", "crypto", "high_risk", "unknown")),
        "tvl_usd": round(v.tvl_usd, 2), "apy_pct": v.apy_pct,
        "looping_rate": round(rng.uniform(0, 0.5), 3),
        "upgradeable": rng.random() < 0.5, "subvault": rng.random() < 0.1,
        "emergency_shutdown": False, "owner_kind": v.owner_kind,
        "pausable": rng.random() < 0.6, "pending_admin_change": rng.random() < 0.03,
        "timelock_seconds": v.timelock_seconds, "redemption_open": True,
        "deposit_open": rng.random() < 0.95, "lockup_seconds": rng.choice((0.0, 0.0, 8 * DAY)),
        "withdrawal_delay_seconds": rng.choice((0.0, 0.0, 3600.0)),
        "utilization": round(rng.uniform(0.05, 0.97), 4), "bad_debt_usd": 0.0,
        "market_liquidity_usd": round(v.tvl_usd * rng.uniform(0.02, 0.5), 2),
        "source_verified": rng.random() < 0.97, "audit_count": rng.choice((0, 1, 2, 3, 5)),
        "exploit_history": rng.random() < 0.05, "deployed_at": float(int(start - v.age_days * DAY)),
        "share_price": 1.0, "expected_share_price": 1.0,
        "oracle_warning": rng.random() < 0.03, "synthetic_asset": rng.random() < 0.05,
        "event_count": int(v.age_days * rng.uniform(0.01, 40)),
        "lifetime_return": round(rng.uniform(-0.02, 0.3), 4),
        "cagr_1m": round(rng.uniform(0, 0.15), 4), "cagr_3m": round(rng.uniform(0, 0.15), 4),
        "net_flow_usd_30d": round(v.tvl_usd * rng.uniform(-0.2, 0.2), 2),
        "fee_bps": rng.choice((0.0, 50.0, 100.0, 200.0, 400.0)), "peer_fee_bps": 120.0,
        "whitelisted": rng.random() < 0.8, "strategy_loss_usd": 0.0,
        "composition": [{"symbol": u.symbol if u else "WETH",
                         "address": u.address if u else None, "share_pct": 100.0}],
    }


def _incident_facts(v: VaultSpec, active: bool) -> dict[str, Any]:
    if v.incident == "redemption":
        return {"redemption_open": not active}
    if v.incident == "bad_debt":
        return {"bad_debt_usd": round(v.tvl_usd * 0.01, 2) if active else 0.0}
    return {}


def _update(ts: float, v: VaultSpec, changes: dict[str, Any]) -> FactUpdate:
    """Through the one validation every consumer uses, so what we publish is what it reads."""
    message = {"ts": ts, "chain": v.chain, "vault": v.address, **changes}
    return make_update(msgspec.convert(message, FactsMessage))


def generate_facts(vaults: list[VaultSpec], *, seed: int, start: float, interval: float,
                   duration: float | None) -> Iterator[FactUpdate]:
    """Fact updates in event-time order: every vault's full record at ``start``, then one
    partial update per vault per ``interval``, with incidents switching on and off."""
    rng = random.Random(f"vault-facts:{seed}")
    for v in vaults:
        yield _update(start, v, _initial(v, start, rng))
    state = {v.address: (v.tvl_usd, 1.0) for v in vaults}
    step = 1
    while duration is None or step * interval <= duration:
        t = start + step * interval
        for v in vaults:
            tvl, share = state[v.address]
            tvl *= 1 + rng.gauss(0, 0.01)
            share *= 1 + rng.gauss(0.00002, 0.0001)
            state[v.address] = (tvl, share)
            changes: dict[str, Any] = {
                "tvl_usd": round(tvl, 2), "apy_pct": round(max(0.0, v.apy_pct
                                                                + rng.gauss(0, 0.3)), 2),
                "utilization": round(min(1.0, max(0.0, rng.uniform(0.05, 0.97))), 4),
                "share_price": round(share, 6), "expected_share_price": round(share, 6),
            }
            begin = start + v.incident_at
            end = begin + v.incident_for
            was = begin <= t - interval < end
            now = begin <= t < end
            if now != was:
                changes.update(_incident_facts(v, now))
            yield _update(t, v, changes)
        step += 1
