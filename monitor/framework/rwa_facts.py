"""A pegged token's facts and structural tags for the rwa framework (rwa_v1.toml). Pure.

Inputs are what the ratings store already holds: the latest rating snapshot (tier, signals,
metrics), the registry's peg type and the token's depeg episodes. Thresholds are here, in
one place, and documented in docs/v3.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..config import ModelConfig
from ..records import RatingSnapshot

#: Minutes more than 0.5 % off peg in the last hour from which the peg is "persistently" off.
PERSISTENT_MINUTES = 15.0
#: A signal score (0-1) from which a warn criterion becomes a fail.
FAIL_SCORE = 0.5
#: Peg types whose reference moves (a commodity, a NAV, anything not a fixed fiat amount).
MOVING_PEGS = frozenset({"gold", "silver", "nav", "other"})


@dataclass(frozen=True)
class Episode:
    worst_tier: str
    ongoing: bool


def _signal(snap: RatingSnapshot, name: str) -> tuple[float | None, float, bool]:
    for s in snap.signals:
        if s.name == name:
            return s.value, s.score, s.observed
    return None, 0.0, False


def token_facts(snap: RatingSnapshot, peg_type: str | None, collapsed: bool,
                episodes: Sequence[Episode],
                oracle_divergence_full: float = ModelConfig().oracle_divergence_full,
                ) -> tuple[set[str], dict[str, Any]]:
    """``(tags, facts)`` for :func:`monitor.framework.composite.score`.
    ``oracle_divergence_full`` is the model's full-signal divergence (a fraction of peg)."""
    tags: set[str] = set()
    facts: dict[str, Any] = {"tier": snap.tier, "registered": peg_type is not None,
                             "peg_type": peg_type, "episodes_total": len(episodes)}
    if collapsed:
        tags.add("rwa-collapsed")
    if snap.tier in ("watch", "warning", "critical"):
        tags.add(f"rwa-tier-{snap.tier}")
    minutes = snap.metrics.get("minutes_below_50bp_60m")
    facts["minutes_below_50bp_60m"] = minutes
    if minutes is not None and minutes >= PERSISTENT_MINUTES:
        tags.add("rwa-persistent-deviation")
    vol_ratio, vol_score, vol_observed = _signal(snap, "volatility_burst")
    facts["volatility_ratio"] = vol_ratio if vol_observed else None
    if vol_observed and vol_score > 0:
        tags.add("rwa-volatility-burst")
    if peg_type is None:
        tags.add("rwa-unregistered")
    elif peg_type in MOVING_PEGS:
        tags.add("rwa-moving-peg")
    # The engine computes the oracle divergence only from a fresh oracle price (the headroom
    # signal also carries the cross-chain spread, so it is not used here).
    divergence_pct = snap.metrics.get("oracle_divergence_pct")
    oracle_observed = divergence_pct is not None
    oracle_score = (min(1.0, abs(divergence_pct) / 100.0 / oracle_divergence_full)
                    if divergence_pct is not None and oracle_divergence_full > 0 else None)
    facts["oracle_observed"] = oracle_observed
    facts["oracle_divergence_score"] = oracle_score
    if not oracle_observed:
        tags.add("rwa-no-oracle")
    elif oracle_score is not None and oracle_score >= FAIL_SCORE:
        tags.add("rwa-oracle-divergence")
    slippage, slip_score, slip_observed = _signal(snap, "slippage")
    facts["liquidity_observed"] = slip_observed
    facts["slippage_bps"] = slippage if slip_observed else None
    if not slip_observed:
        tags.add("rwa-no-liquidity-data")
    elif slip_score >= FAIL_SCORE:
        tags.add("rwa-thin-liquidity")
    elif slip_score > 0:
        tags.add("rwa-slippage-elevated")
    if any(e.ongoing for e in episodes):
        tags.add("rwa-ongoing-episode")
    if any(e.worst_tier == "critical" for e in episodes):
        tags.add("rwa-past-critical-depeg")
    elif episodes:
        tags.add("rwa-past-depeg")
    return tags, facts
