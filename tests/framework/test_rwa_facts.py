"""The pegged-token facts and tags behind E3 (monitor/framework/rwa_facts.py)."""

from __future__ import annotations

import msgspec

from monitor.framework.composite import score
from monitor.framework.model import load_framework
from monitor.framework.rwa_facts import Episode, token_facts
from monitor.records import RatingSnapshot, SignalValue
from monitor.testing import rating_snapshot


def snap(tier: str = "ok", rating: float = 10.0, minutes: float | None = 0.0,
         slippage: tuple[float, float] | None = None,
         oracle: float | None = None) -> RatingSnapshot:
    base = rating_snapshot("eth", "0x" + "11" * 20, 1.7e9, rating, tier)
    signals = []
    for s in base.signals:
        if s.name == "slippage" and slippage is not None:
            s = SignalValue(s.name, slippage[0], slippage[1], s.weight, 0.0, True)
        signals.append(s)
    # ``oracle``: the divergence as a share of the full signal (2 % of peg by default).
    metrics = {**base.metrics, "minutes_below_50bp_60m": minutes,
               "oracle_divergence_pct": None if oracle is None else oracle * 2.0}
    return msgspec.structs.replace(base, signals=signals, metrics=metrics)


def test_every_fact_the_framework_reads_is_produced() -> None:
    _, facts = token_facts(snap(), "usd", False, [])
    named = {f for _, crit in load_framework("v1", "rwa").criteria() for f in crit.facts}
    assert named <= set(facts)


def test_tags_by_situation() -> None:
    healthy, _ = token_facts(snap(slippage=(5.0, 0.0), oracle=0.0), "usd", False, [])
    assert healthy == set()
    tags, _ = token_facts(snap("warning", 65, minutes=20, slippage=(150.0, 0.7),
                               oracle=0.6), "nav", False,
                          [Episode("warning", ongoing=True)])
    assert tags == {"rwa-tier-warning", "rwa-persistent-deviation", "rwa-thin-liquidity",
                    "rwa-oracle-divergence", "rwa-moving-peg", "rwa-ongoing-episode",
                    "rwa-past-depeg"}
    tags, facts = token_facts(snap(minutes=None), None, True,
                              [Episode("critical", ongoing=False)])
    assert {"rwa-unregistered", "rwa-no-oracle", "rwa-no-liquidity-data", "rwa-collapsed",
            "rwa-past-critical-depeg"} <= tags
    assert facts["minutes_below_50bp_60m"] is None and facts["registered"] is False


def test_collapsed_token_is_f_and_healthy_usd_is_a_plus() -> None:
    fw = load_framework("v1", "rwa")
    tags, facts = token_facts(snap("critical", 85), "usd", True, [])
    assert score(fw, tags, facts, 85, "v2").composite.grade == "F"
    tags, facts = token_facts(snap(slippage=(5.0, 0.0), oracle=0.0), "usd", False, [])
    healthy = score(fw, tags, facts, 3.0, "v2").composite
    assert (healthy.framework_score, healthy.score, healthy.grade) == (0.0, 3.0, "A+")
    assert healthy.clamped_by_upstream is True
