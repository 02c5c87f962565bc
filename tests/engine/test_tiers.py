"""The tier is the band of the published rating; the published rating holds and decays."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import ModelConfig
from monitor.engine.rating import Held, publish
from monitor.engine.tiers import TierState, band, step
from monitor.records import Tier

CFG = ModelConfig()


def test_bands_follow_the_spec() -> None:
    assert [band(r, CFG) for r in (0, 39.99, 40, 59.99, 60, 79.99, 80, 100)] == [
        Tier.OK, Tier.OK, Tier.WATCH, Tier.WATCH, Tier.WARNING, Tier.WARNING,
        Tier.CRITICAL, Tier.CRITICAL,
    ]


def test_tier_is_the_band_and_can_skip_tiers() -> None:
    s = TierState()
    assert step(s, 85.0, -0.1, 0, 0.0, CFG) is Tier.CRITICAL
    assert step(s, 79.99, -0.1, 0, 300.0, CFG) is Tier.WARNING
    assert step(s, 10.0, -0.001, 0, 600.0, CFG) is Tier.OK


def test_escalation_is_immediate_and_stress_decay_is_slow() -> None:
    h = Held()
    assert publish(h, 90.0, 0.0, False, 0.0, CFG) == 90.0
    # Raw collapses to 50 (within the 20-point margin of the critical edge): the rating
    # decays 10 points an hour but stops at 80 while the raw rating keeps within margin.
    assert publish(h, 50.0, 0.0, False, 1800.0, CFG) == 85.0
    assert publish(h, 65.0, 0.0, False, 5 * 3600.0, CFG) == 80.0
    # Raw far below (35 < 80 - 20) but it supported the band within the last hour: held.
    assert publish(h, 35.0, 0.0, False, 5 * 3600.0 + 1800, CFG) == 80.0
    # An hour without support: the decay resumes, one band in two hours.
    assert publish(h, 35.0, 0.0, False, 6 * 3600.0 + 1800, CFG) == 70.0
    # Into warning, where a raw 35 is not within margin of 60 either: on down to watch,
    # which a raw 35 does support (35 >= 40 - 20), so the rating rests at its edge.
    assert publish(h, 35.0, 0.0, False, 8 * 3600.0 + 1800, CFG) == 50.0
    assert publish(h, 35.0, 0.0, False, 12 * 3600.0, CFG) == 40.0


def test_calm_decays_fast_to_ok_within_two_hours() -> None:
    h = Held()
    publish(h, 100.0, 80.0, False, 0.0, CFG)
    ratings = [publish(h, 3.0, 0.0, True, t * 300.0, CFG) for t in range(1, 25)]
    assert all(a >= b for a, b in itertools.pairwise(ratings))
    assert band(ratings[-1], CFG) is Tier.OK  # 2 hours of calm: 100 - 80
    # 40 points an hour: 100 is below 40 at the first refresh after 90 minutes.
    assert (next(i for i, r in enumerate(ratings) if r < 40) + 1) * 300 == 5700


def test_floor_and_raw_lift_at_once() -> None:
    h = Held()
    assert publish(h, 10.0, 80.0, False, 0.0, CFG) == 80.0
    assert publish(h, 95.0, 60.0, False, 300.0, CFG) == 95.0


def test_premium_needs_a_sustained_premium_and_only_replaces_ok() -> None:
    s = TierState()
    assert step(s, 0.0, 0.0001, 60, 0.0, CFG) is None            # 1.0001 is not premium
    assert step(s, 0.0, 0.006, 59, 300.0, CFG) is None            # not long enough yet
    assert step(s, 0.0, 0.006, 60, 600.0, CFG) is Tier.PREMIUM
    assert step(s, 0.0, 0.003, 0, 900.0, CFG) is None             # inside the hysteresis
    assert step(s, 0.0, 0.001, 0, 1200.0, CFG) is Tier.OK
    # A rating in a risk band outranks trading above peg.
    assert step(TierState(), 45.0, 0.02, 60, 0.0, CFG) is Tier.WATCH


@settings(max_examples=500, deadline=None)
@given(x=st.floats() | st.sampled_from([0.0, -0.0, 12.345, 12.355, 99.995, 100.0]))
def test_the_remembered_rounding_is_round(x: float) -> None:
    """The published rating's ``round(x, 2)`` is remembered by value: the first and the
    remembered answer are ``round``'s, to the bit (-0.0 stays -0.0, NaN stays NaN)."""
    from monitor.engine.rating import _round2

    assert repr(_round2(x)) == repr(round(x, 2))
    assert repr(_round2(x)) == repr(round(x, 2))
