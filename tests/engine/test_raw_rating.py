"""A refresh without a snapshot works out the raw rating without the per-signal breakdown
(``signals.evaluate``'s written-out weighted sum, docs/performance.md fourteenth pass);
it must be the very float the breakdown's path (``combine`` over the six signals) gives.

The independent truth is ``combine``: the same windows and observations evaluated with
``detail=True``. Weights are drawn (zeros included: a signal that is observed but weighs
nothing, no observed weight at all), observations fresh, stale and absent, prices on
either side of every line, so each signal is observed or not and scores 0, 1 or between.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import ModelConfig, Weights
from monitor.engine.params import params
from monitor.engine.signals import Observations, evaluate
from monitor.engine.windows import Windows
from tests.engine.helpers import T0

weights = st.builds(Weights, *(st.sampled_from([0.0, 1.0, 7.5, 30.0]) for _ in range(6)))
deviations = st.one_of(st.sampled_from([0.0, -0.004, -0.006, -0.012, -0.05, 0.006, -0.2]),
                       st.floats(-0.3, 0.05, allow_nan=False))
ages = st.one_of(st.none(), st.integers(0, 7200))


@settings(max_examples=300, deadline=None)
@given(w=weights, devs=st.lists(st.tuples(st.integers(1, 400), deviations), min_size=0,
                                 max_size=30),
       slippage=st.one_of(st.none(), st.floats(0.0, 500.0)), slip_age=ages,
       oracle=st.one_of(st.none(), st.floats(0.8, 1.2)), oracle_age=ages,
       spread=st.one_of(st.none(), st.floats(0.0, 0.05)), spread_age=ages,
       later=st.integers(0, 4000))
def test_the_raw_rating_without_detail_is_combines(
        w: Weights, devs: list[tuple[int, float]], slippage: float | None,
        slip_age: int | None, oracle: float | None, oracle_age: int | None,
        spread: float | None, spread_age: int | None, later: int) -> None:
    cfg = params(ModelConfig(weights=w))
    windows = Windows(60, 61, 0.005, 0.01, 86_400)
    ts = T0
    for gap, dev in devs:
        ts += gap
        windows.add_price(ts, dev)
    now = ts + later
    obs = Observations(peg=1.0)
    if devs:
        obs.price, obs.price_ts = 1.0 + devs[-1][1], ts
    if slip_age is not None:
        obs.slippage_bps, obs.slippage_ts = slippage, now - slip_age
    if oracle_age is not None:
        obs.oracle_price, obs.oracle_ts = oracle, now - oracle_age
    if spread_age is not None:
        obs.spread, obs.spread_ts = spread, now - spread_age
    quick = evaluate(windows, obs, cfg, now, detail=False)
    full = evaluate(windows, obs, cfg, now, detail=True)
    # raw rating, observed weight, deviation, calm minimum: the same values and types
    picks = (0, 2, 3, 5)
    assert [repr(quick[i]) for i in picks] == [repr(full[i]) for i in picks]
    assert [type(quick[i]) for i in picks] == [type(full[i]) for i in picks]
    assert quick[1] == [] and quick[4] == {}
