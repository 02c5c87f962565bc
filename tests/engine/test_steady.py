"""A quiet refresh that reuses the last refresh's figures (monitor/engine/steady.py) gives
exactly what working them out again gives.

The independent truth is the detail path: an engine making rating snapshots never takes
the short-cut and reads every window with the plain ``Windows.window``. Fed the same
ticks, an engine without snapshots must make the same tier changes and hold the same
state (published-rating memory, tier, windows) after every tick and every quiet stretch,
also across an export/restore. Feeds are sparse on purpose (gaps of hours, so most
refreshes are quiet) with slippage, oracle and spread ticks whose ages cross their
limits during the quiet stretches, prices around the floor and premium lines, and
refresh intervals that are and are not multiples of the bucket.
"""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import ModelConfig
from monitor.engine import Engine
from monitor.engine.figures import refresh_figures
from monitor.engine.signals import Observations
from monitor.engine.steady import Steady, steady_figures
from monitor.engine.windows import Windows
from monitor.records import TierChangeEvent
from monitor.ticks import Tick, make_tick
from tests.engine.helpers import T0, USDC

KEY = f"eth:{USDC}"

gaps = st.one_of(
    st.integers(1, 600),                      # a busy feed
    st.integers(600, 30_000),                 # a quiet one: hours of quiet refreshes
    st.sampled_from([0, 60, 300, 3600, 3660, 86_400]),  # on boundaries, heartbeats
)
prices = st.one_of(
    st.sampled_from(["1", "1.0001", "0.999", "0.995", "0.99", "0.98", "0.95", "0.9",
                     "1.006", "1.01"]),
    st.floats(0.85, 1.02).map(lambda p: f"{p:.6f}"),
)
tick_parts = st.tuples(
    gaps,
    st.one_of(st.none(), prices),                                      # price
    st.one_of(st.none(), st.sampled_from(["3", "40", "250"])),          # slippage bps
    st.one_of(st.none(), prices),                                      # oracle price
    st.one_of(st.none(), st.sampled_from([0.0, 15.0, 120.0])),          # spread bps
)
configs = st.sampled_from([
    ModelConfig(),
    ModelConfig(refresh_seconds=60),
    ModelConfig(refresh_seconds=90, lateness_seconds=0),
    ModelConfig(refresh_seconds=420, floor_window_seconds=1800, floor_watch_minutes=20,
                floor_critical_minutes=10, floor_warning_minutes=15),
    ModelConfig(bucket_seconds=120, refresh_seconds=300),
    ModelConfig(refresh_seconds=0),
])


def build(parts: list[tuple[int, str | None, str | None, str | None, float | None]],
          ) -> list[Tick]:
    ticks, ts = [], T0
    for gap, price, slippage, oracle, spread in parts:
        ts += gap
        if spread is not None:  # the spread stage's observation of the token's asset
            ticks.append(make_tick(ts, "eth", USDC, "USDC", None, None,
                                   cross_chain_spread_bps=spread, cross_chain_chains=2))
        if price is not None or slippage is not None or oracle is not None:
            ticks.append(make_tick(ts, "eth", USDC, "USDC", price, "1", slippage, oracle))
    return ticks


def states(engine: Engine) -> object:
    return msgspec.msgpack.decode(engine.export_state(KEY)) if KEY in engine.keys() else None


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(tick_parts, min_size=1, max_size=60), cfg=configs,
       restore_at=st.integers(0, 60), quiet=st.integers(0, 2 * 86_400))
def test_quiet_refreshes_equal_the_detail_path(
        parts: list[tuple[int, str | None, str | None, str | None, float | None]],
        cfg: ModelConfig, restore_at: int, quiet: int) -> None:
    plain = Engine(cfg, snapshots=True)
    fast = Engine(cfg, snapshots=False)
    # Snapshots once an hour: the refreshes between take the short-cut too.
    hourly = Engine(msgspec.structs.replace(cfg, snapshot_seconds=3600), snapshots=True)
    ticks = build(parts)
    for n, tick in enumerate(ticks):
        if n == restore_at and KEY in fast.keys():  # the memo is not saved: starts empty
            restored = Engine(cfg, snapshots=False)
            restored.restore_state(fast.export_state(KEY))
            fast = restored
        expected = [o for o in plain.process(tick) if isinstance(o, TierChangeEvent)]
        assert fast.process(tick) == expected
        assert [o for o in hourly.process(tick) if isinstance(o, TierChangeEvent)] == expected
        assert states(fast) == states(plain) == states(hourly)
    # The quiet stretch after the last tick, refreshed by the live clock.
    until = (ticks[-1].ts if ticks else T0) + quiet
    expected = [o for o in plain.advance(KEY, until) if isinstance(o, TierChangeEvent)]
    assert fast.advance(KEY, until) == expected
    assert [o for o in hourly.advance(KEY, until) if isinstance(o, TierChangeEvent)] == expected
    assert states(fast) == states(plain) == states(hourly)


def _same(a: object, b: object) -> bool:
    return repr(a) == repr(b)  # floats by repr: -0.0 and 0.0 differ


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(tick_parts, min_size=1, max_size=40), cfg=configs,
       step=st.sampled_from([60, 90, 300, 420]), quiet=st.integers(0, 20_000))
def test_steady_figures_equal_the_figures_worked_out(
        parts: list[tuple[int, str | None, str | None, str | None, float | None]],
        cfg: ModelConfig, step: int, quiet: int) -> None:
    """The function itself, refreshed at every step of a grid between and after the
    ticks, against ``refresh_figures`` on the same windows at the same moment."""
    w = Windows(cfg.bucket_seconds, 62, cfg.persistence_low, cfg.persistence_high,
                cfg.volatility_baseline_seconds)
    obs = Observations(peg=1.0)
    memo: Steady | None = None
    sig: object = None
    now = (T0 // step) * step
    for tick in build(parts):
        while now < tick.ts:
            if w.last_dev is not None:
                memo, got = steady_figures(memo, w, obs, sig, cfg, now)
                assert _same(got, refresh_figures(w, obs, cfg, now, detail=False)[0])
            now += step
        sig = (tick.ts, tick.price)  # a new object per applied tick, as in the engine
        if tick.price is not None:
            w.add_price(tick.ts, tick.price - 1.0)
        if tick.slippage_bps is not None:
            obs.slippage_bps, obs.slippage_ts = tick.slippage_bps, tick.ts
        if tick.oracle_price is not None:
            obs.oracle_price, obs.oracle_ts = tick.oracle_price, tick.ts
        if tick.cross_chain_chains is not None:
            spread = tick.cross_chain_spread_bps
            obs.spread, obs.spread_ts = (None if spread is None else spread / 1e4), tick.ts
    end = now + quiet
    while now <= end and w.last_dev is not None:
        memo, got = steady_figures(memo, w, obs, sig, cfg, now)
        assert _same(got, refresh_figures(w, obs, cfg, now, detail=False)[0])
        now += step


def test_a_quiet_feed_takes_the_short_cut() -> None:
    """Without this the equality above could hold because the short-cut never ran: one
    price, then a day of 5-minute refreshes; all but the first hour's reuse figures."""
    cfg = ModelConfig()
    w = Windows(cfg.bucket_seconds, 61, cfg.persistence_low, cfg.persistence_high,
                cfg.volatility_baseline_seconds)
    obs = Observations(peg=1.0)
    w.add_price(T0, -0.001)
    sig: object = (T0,)
    memo: Steady | None = None
    reused = 0
    for k in range(1, 289):
        before = memo
        memo, _ = steady_figures(memo, w, obs, sig, cfg, T0 + k * 300.0)
        reused += memo is before and memo is not None
    assert reused >= 288 - 14
    # A new tick (a new signature) is never answered from the memo.
    memo2, _ = steady_figures(memo, w, obs, (T0,), cfg, T0 + 289 * 300.0)
    assert memo2 is not memo
