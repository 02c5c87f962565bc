"""A calm quiet refresh that skips ``publish_rating`` and ``step_tier`` (``_Token.quiet``,
monitor/engine/refresh.py) publishes what they would have published.

The short-cut applies only when every input of those two steps is the same, bit for bit,
as at the refresh that made it. The test that is hardest to reach by feeding ticks is the
elapsed time since the held rating was made: with a tiny calm decay a rating is its own
fixpoint over one refresh interval (the decay vanishes in the rounding to 2 decimals),
but not over a much longer one. The independent truth is ``publish_rating`` itself,
called on a copy of the held state.
"""

from __future__ import annotations

from monitor.config import ModelConfig
from monitor.engine import Engine
from monitor.engine.params import params
from monitor.engine.rating import Held, publish_rating
from monitor.engine.steady import steady_figures_of
from monitor.ticks import make_tick
from tests.engine.helpers import T0, USDC

KEY = f"eth:{USDC}"


def refresh_at(engine: Engine, now: float) -> None:
    """Every refresh up to ``now`` included (``advance`` holds back the lateness)."""
    engine.advance(KEY, now + engine.config.lateness_seconds)


def test_a_longer_gap_decays_the_rating_the_short_cut_would_have_kept() -> None:
    cfg = ModelConfig(calm_decay_per_hour=1e-12)
    engine = Engine(cfg, snapshots=False)
    engine.process(make_tick(T0, "eth", USDC, "USDC", "1", "1", None))
    refresh_at(engine, T0 + 3 * 3600)  # quiet for hours: the steady memo holds
    t = engine._tokens[KEY]
    t.held.rating = 20.0  # below watch_at: no tier change; decays by ~1e-13 a refresh
    now = T0 + 3 * 3600 + 300
    refresh_at(engine, now)
    assert t.held.rating == 20.0
    assert t.quiet is not None  # the short-cut is ready for the same inputs again
    # The held rating made long ago: the same rating, another elapsed time.
    t.held.at = now - 3.6e14  # 0.1 points of calm decay at 1e-12 an hour
    expected_held = Held(t.held.rating, t.held.at, t.held.support_at)  # a copy
    _, figures = steady_figures_of(t.steady, t.windows, t.obs, t.sig_tick, params(cfg),
                                   now + 300)
    raw, floor, _, calm, _ = figures
    expected = publish_rating(expected_held, raw, floor, calm, now + 300, params(cfg))
    refresh_at(engine, now + 300)
    assert expected == 19.9
    assert t.held.rating == expected
    assert t.held == expected_held


def test_the_same_inputs_again_take_the_short_cut_and_publish_the_same() -> None:
    cfg = ModelConfig(calm_decay_per_hour=1e-12)
    engine = Engine(cfg, snapshots=False)
    engine.process(make_tick(T0, "eth", USDC, "USDC", "1", "1", None))
    refresh_at(engine, T0 + 3 * 3600)
    t = engine._tokens[KEY]
    t.held.rating = 20.0
    refresh_at(engine, T0 + 3 * 3600 + 300)
    quiet = t.quiet
    refresh_at(engine, T0 + 3 * 3600 + 600)
    assert t.quiet is quiet  # taken, not made again
    assert t.held.rating == 20.0 and t.held.at == T0 + 3 * 3600 + 600
    assert t.held.support_at is None
