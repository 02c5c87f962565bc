"""Engine behaviour: every tier reachable from prices alone, event shape, lateness, state."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from monitor.config import ModelConfig
from monitor.engine import Engine
from monitor.engine.engine import Output
from monitor.records import RatingSnapshot, TierChangeEvent, encode
from monitor.ticks import Tick, make_tick
from tests.engine.helpers import GOLD, T0, USDC, price_ticks


def run(ticks: list[Tick], config: ModelConfig | None = None) -> list[Output]:
    engine = Engine(config or ModelConfig())
    out: list[Output] = []
    for tick in ticks:
        out += engine.process(tick)
    out += engine.flush()
    return out


def events(outputs: Iterable[object]) -> list[TierChangeEvent]:
    return [o for o in outputs if isinstance(o, TierChangeEvent)]


def test_price_only_feed_reaches_every_tier() -> None:
    # Calm, then 1.2 %, 3 % or 12 % below peg for two hours: watch, warning, critical.
    for level, tier in ((0.988, "watch"), (0.97, "warning"), (0.88, "critical")):
        tiers = [e.data.new_tier for e in events(run(price_ticks([1.0] * 60 + [level] * 120)))]
        assert tiers and tiers[-1] == tier, (level, tiers)
    premium = [e.data.new_tier for e in events(run(price_ticks([1.0] * 30 + [1.02] * 75)))]
    assert premium == ["premium"]


def test_event_object_is_exactly_the_spec_shape() -> None:
    out = events(run(price_ticks([1.0] * 10 + [0.85] * 30)))
    first = out[0]
    raw = encode(first)
    assert raw.startswith(b'{"event_type":"DEPEG_TIER_CHANGE","event_id":"')
    assert list(first.data.__struct_fields__) == [
        "token_address", "chain", "symbol", "old_tier", "new_tier", "risk_score",
        "deviation_pct", "price_usd", "peg_usd",
    ]
    assert uuid.UUID(first.event_id).version == 5
    assert first.data.price_usd == "0.85" and first.data.peg_usd == "1"
    assert first.timestamp.endswith(":00Z") and b" " not in raw


def test_peg_is_taken_from_the_tick_not_assumed() -> None:
    # A gold token at 2,000 USD peg trading at 1,999: not a depeg.
    ticks = price_ticks([1999.0] * 120, token=GOLD, peg="2000", symbol="XAUT")
    snaps = [o for o in run(ticks) if isinstance(o, RatingSnapshot)]
    assert snaps and all(s.tier == "ok" for s in snaps)
    assert abs((snaps[-1].deviation_pct or 0) + 0.05) < 1e-6


def test_late_and_duplicate_ticks_are_counted_not_applied() -> None:
    engine = Engine(ModelConfig(lateness_seconds=120))
    ticks = price_ticks([1.0] * 20)
    for t in ticks:
        engine.process(t)
    engine.process(ticks[5])  # far too late: dropped
    engine.process(make_tick(ticks[-1].ts - 60, "eth", USDC, "USDC", "0.999", "1"))  # in time
    engine.flush()
    assert engine.stats.late == 1
    engine2 = Engine(ModelConfig(lateness_seconds=0))
    engine2.process(ticks[0])
    engine2.process(ticks[0])
    assert engine2.stats.duplicates == 1


def test_out_of_order_within_lateness_gives_the_same_result() -> None:
    ticks = price_ticks([1.0] * 30 + [0.9] * 60 + [1.0] * 30)
    shuffled = list(ticks)
    for i in range(0, len(shuffled) - 1, 2):  # swap neighbours: 60 s out of order
        shuffled[i], shuffled[i + 1] = shuffled[i + 1], shuffled[i]
    cfg = ModelConfig(lateness_seconds=120)
    assert [encode(o) for o in run(ticks, cfg)] == [encode(o) for o in run(shuffled, cfg)]


def test_state_export_and_restore_continues_exactly() -> None:
    ticks = price_ticks([1.0] * 60 + [0.95] * 90 + [0.999] * 400)
    whole = [encode(o) for o in run(ticks)]
    for cut in (1, 75, 200, 500):
        first = Engine()
        out = []
        for t in ticks[:cut]:
            out += first.process(t)
        second = Engine()
        key = second.restore_state(first.export_state(ticks[0].key))
        assert key == ticks[0].key
        for t in ticks[cut:]:
            out += second.process(t)
        out += second.flush()
        assert [encode(o) for o in out] == whole, cut


def test_advance_refreshes_a_quiet_token() -> None:
    engine = Engine()
    for t in price_ticks([0.8] * 30):
        engine.process(t)
    key = f"eth:{USDC}"
    last = engine.last_tick_ts(key)
    assert last is not None
    out = engine.advance(key, last + 3600)
    snaps = [o for o in out if isinstance(o, RatingSnapshot)]
    assert len(snaps) >= 11
    assert snaps[-1].staleness_seconds >= 3000
    assert engine.advance(key, last + 3600) == []  # nothing due twice


def test_refresh_on_every_tick_when_configured() -> None:
    out = run(price_ticks([1.0] * 10), ModelConfig(refresh_seconds=0, lateness_seconds=0))
    assert len([o for o in out if isinstance(o, RatingSnapshot)]) == 10


def test_snapshot_carries_every_signal_and_contribution() -> None:
    ticks = price_ticks([0.97] * 30)
    ticks.append(make_tick(T0 + 1800, "eth", USDC, "USDC", None, None, "150"))
    snap = [o for o in run(ticks + price_ticks([0.97] * 5, start=T0 + 1860))
            if isinstance(o, RatingSnapshot)][-1]
    names = [s.name for s in snap.signals]
    assert names == ["price_deviation", "slippage", "persistence_50bp", "persistence_100bp",
                     "volatility_burst", "headroom"]
    assert abs(sum(s.contribution for s in snap.signals) - snap.rating) < 0.05
    slip = next(s for s in snap.signals if s.name == "slippage")
    assert slip.observed and slip.value == 150.0
    assert len(snap.metrics) >= 30
