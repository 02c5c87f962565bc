"""The per-tick path's short cuts (docs/performance.md, eleventh pass) against independent
truths:

- ``Windows.add_price``'s short path for a price in the head bucket is opened only by its
  general path and shut by ``load``: a ring exported and loaded anywhere in a stream goes
  on exactly as the reference code (``test_add_price.reference_add_price``) does.
- The engine keeps the last applied tick, not its signature: ``last_sig`` must be the
  signature of the last tick the duplicate rule let through (worked out here by brute
  force), the very same object while no tick is applied (``steady`` tests identity), and
  survive an export/restore.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import ModelConfig
from monitor.engine import Engine, Output
from monitor.engine.windows import Windows
from monitor.ticks import Tick, make_tick
from tests.engine.helpers import T0, USDC
from tests.engine.test_add_price import (
    BUCKET,
    TAU,
    deviations,
    gaps,
    reference_add_price,
    state,
)

KEY = f"eth:{USDC}"


def reloaded(w: Windows, ts: float) -> Windows:
    """``w``'s state loaded into a ring that had taken a price at ``ts`` itself (its
    short path open for that bucket: ``load`` must shut it)."""
    out = Windows(BUCKET, w.size, w.low, w.high, TAU)
    out.add_price(ts, 0.0)
    out.load(w.export())
    return out


@settings(max_examples=200, deadline=None)
@given(start=st.sampled_from([0.0, 1_700_000_020.5]),
       steps=st.lists(st.tuples(gaps, deviations, st.booleans()), max_size=120),
       size=st.sampled_from([61, 7, 2]),
       lines=st.sampled_from([(0.005, 0.01), (0.01, 0.005)]))
def test_add_price_after_a_load_goes_on_as_the_reference(
        start: float, steps: list[tuple[float, float, bool]], size: int,
        lines: tuple[float, float]) -> None:
    fast = Windows(BUCKET, size, lines[0], lines[1], TAU)
    plain = Windows(BUCKET, size, lines[0], lines[1], TAU)
    ts = start
    for gap, dev, reload in steps:
        ts += gap
        if reload:  # both as a restart would see them: the short path shut
            fast, plain = reloaded(fast, ts), reloaded(plain, ts)
        fast.add_price(ts, dev)
        reference_add_price(plain, ts, dev)
        assert state(fast) == state(plain)


Sig = tuple[float | None, ...]


def sig_of(tick: Tick) -> Sig:
    return (tick.price, tick.slippage_bps, tick.oracle_price, tick.cross_chain_spread_bps,
            tick.cross_chain_chains)


ticks = st.lists(
    st.tuples(
        st.sampled_from([0, 0, 0, 1, 2, 61]),                  # gap (ties on purpose)
        st.sampled_from([None, "1", "0.99"]),                  # price
        st.sampled_from([None, "3", "40"]),                    # slippage
        st.sampled_from([None, "1", "0.98"]),                  # oracle
    ),
    min_size=1, max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(parts=ticks, cut=st.integers(0, 80))
def test_last_sig_is_the_last_applied_ticks(
        parts: list[tuple[int, str | None, str | None, str | None]], cut: int) -> None:
    config = ModelConfig(lateness_seconds=0)  # every tick applied as it comes
    engine = Engine(config)
    ts = T0
    expected: Sig | None = None
    applied_ts: float | None = None
    duplicates = 0
    for n, (gap, price, slippage, oracle) in enumerate(parts):
        ts += gap
        if n == cut and n > 0:
            blob = engine.export_state(KEY)
            engine = Engine(config)
            engine.restore_state(blob)
        if price is None and slippage is None and oracle is None:
            price = "1"  # a tick must observe something
        tick = make_tick(ts, "eth", USDC, "USDC", price, "1", slippage, oracle)
        before = engine._tokens[KEY].last_sig if KEY in engine._tokens else None
        engine.process(tick)
        sig = sig_of(tick)
        duplicate = ts == applied_ts and sig == expected
        if not duplicate:
            applied_ts, expected = ts, sig
        t = engine._tokens[KEY]
        got = t.last_sig
        assert got == expected
        assert t.last_sig is got  # the same object while nothing is applied
        if duplicate and before is not None:
            assert got is before
        duplicates = 0 if n == cut else duplicates
        duplicates += duplicate
        assert engine.stats.duplicates == duplicates


@settings(max_examples=100, deadline=None)
@given(parts=st.lists(st.tuples(st.integers(0, 1), st.integers(-200, 90),
                                st.sampled_from(["1", "0.99", "0.97", "0.9"])),
                      min_size=1, max_size=120),
       keyed=st.booleans())
def test_take_appends_to_the_callers_list_and_tells_late_ticks(
        parts: list[tuple[int, int, str]], keyed: bool) -> None:
    """``Engine.take`` (the daemon's and the replay's call) appends a tick's outputs to the
    list it is given, after what it holds, and returns False exactly for a tick counted
    late: the rule the daemon applied to ``process`` before (``stats.late`` moved)."""
    from monitor.records import encode

    config = ModelConfig(lateness_seconds=30, refresh_seconds=60)
    engine, taking = Engine(config), Engine(config)
    shared: list[Output] = []
    expected: list[bytes] = []
    tokens = (USDC, "0x" + "5" * 40)
    ts = [T0, T0]
    for which, step, price in parts:
        ts[which] += step  # backwards now and then: late ticks
        tick = make_tick(ts[which], "eth", tokens[which], "USDX", price, "1")
        expected += [encode(o) for o in engine.process(tick)]
        late = taking.stats.late
        taken = taking.take(tick, tick.key if keyed else None, None, shared)
        assert taken == (taking.stats.late == late)
    expected += [encode(o) for o in engine.flush()]
    shared += taking.flush()
    assert [encode(o) for o in shared] == expected
    assert engine.stats == taking.stats
    for token in tokens:
        key = f"eth:{token}"
        if key in engine._tokens:
            assert taking.export_state(key) == engine.export_state(key)
