"""The tier machine: bands, premium hysteresis, immediate escalation, slow de-escalation."""

from __future__ import annotations

from monitor.config import ModelConfig
from monitor.engine.tiers import TierState, band, step
from monitor.records import Tier

CFG = ModelConfig(deescalate_margin=10.0, deescalate_dwell_seconds=1800)


def test_bands_follow_the_spec() -> None:
    assert [band(r, CFG) for r in (0, 39.99, 40, 59.99, 60, 79.99, 80, 100)] == [
        Tier.OK, Tier.OK, Tier.WATCH, Tier.WATCH, Tier.WARNING, Tier.WARNING,
        Tier.CRITICAL, Tier.CRITICAL,
    ]


def test_escalation_is_immediate_and_can_skip_tiers() -> None:
    s = TierState()
    assert step(s, 85.0, -0.1, 0.0, CFG) is Tier.CRITICAL


def test_deescalation_needs_margin_and_dwell() -> None:
    s = TierState()
    step(s, 65.0, -0.03, 0.0, CFG)
    assert s.tier is Tier.WARNING
    # Below the band but inside the margin: never steps down.
    for t in range(1, 20):
        assert step(s, 55.0, -0.02, t * 300.0, CFG) is None
    # Clear of the margin, but not for long enough yet.
    assert step(s, 45.0, -0.01, 6000.0, CFG) is None
    assert step(s, 45.0, -0.01, 6000.0 + 1500, CFG) is None
    # A bounce back resets the dwell.
    assert step(s, 52.0, -0.01, 6000.0 + 1600, CFG) is None
    assert step(s, 45.0, -0.01, 8000.0, CFG) is None
    assert step(s, 45.0, -0.01, 8000.0 + 1800, CFG) is Tier.WATCH


def test_steps_down_only_as_far_as_the_dwell_peak_allows() -> None:
    s = TierState()
    step(s, 90.0, -0.08, 0.0, CFG)
    step(s, 45.0, -0.01, 300.0, CFG)   # peak of the dwell: watch territory (45 + 10 < 60)
    assert step(s, 5.0, 0.0, 300.0 + 1800, CFG) is Tier.WATCH


def test_premium_needs_a_real_premium_and_has_hysteresis() -> None:
    s = TierState()
    assert step(s, 0.0, 0.0001, 0.0, CFG) is None            # 1.0001 is not premium
    assert step(s, 0.0, 0.006, 300.0, CFG) is Tier.PREMIUM
    assert step(s, 0.0, 0.003, 600.0, CFG) is None            # inside the hysteresis band
    assert step(s, 0.0, 0.001, 900.0, CFG) is Tier.OK


def test_risk_outranks_premium() -> None:
    s = TierState()
    assert step(s, 70.0, 0.02, 0.0, CFG) is Tier.WARNING
