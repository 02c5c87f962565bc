"""The depeg model's promises: tier = band(rating), floors, honest states, above peg."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import ModelConfig
from monitor.engine import Engine
from monitor.engine.tiers import band
from monitor.records import SEVERITY, RatingSnapshot, Tier, TierChangeEvent
from monitor.ticks import Tick, make_tick
from monitor.timefmt import parse_ts
from tests.engine.helpers import T0, USDC, price_ticks

CFG = ModelConfig(lateness_seconds=0)


def run(ticks: list[Tick], config: ModelConfig = CFG,
        until: float | None = None) -> list[RatingSnapshot | TierChangeEvent]:
    """Every output, then (``until``) the refreshes a live clock would make up to then."""
    engine = Engine(config)
    out: list[RatingSnapshot | TierChangeEvent] = []
    for tick in sorted(ticks, key=lambda t: t.ts):
        out += engine.process(tick)
    out += engine.flush()
    if until is not None:
        for key in list(engine.keys()):
            out += engine.advance(key, until)
    return out


def snapshots(outputs: list[RatingSnapshot | TierChangeEvent]) -> list[RatingSnapshot]:
    return [o for o in outputs if isinstance(o, RatingSnapshot)]


def events(outputs: list[RatingSnapshot | TierChangeEvent]) -> list[TierChangeEvent]:
    return [o for o in outputs if isinstance(o, TierChangeEvent)]


def tier_matches_band(tier: str, rating: float, config: ModelConfig = CFG) -> bool:
    """The invariant: the tier is the band of the rating; premium is the above-peg ok."""
    b = band(rating, config).value
    return tier == b or (tier == Tier.PREMIUM and b == Tier.OK)


def extra(ts: float, slippage: float | None, oracle: float | None) -> Tick:
    return make_tick(ts, "eth", USDC, "USDC", None, None, slippage, oracle)


def test_healthy_liquidity_and_an_agreeing_oracle_never_hide_a_clear_depeg() -> None:
    # 5 % below peg for two hours: critical from prices alone; still critical when healthy
    # slippage ticks and an oracle that agrees with the price come in beside them.
    prices = price_ticks([1.0] * 30 + [0.95] * 120)
    others = [extra(T0 + 60 * i + 30, 2.0, 0.95 if i >= 30 else 1.0) for i in range(150)]
    alone = snapshots(run(prices))[-1]
    both = snapshots(run(prices + others))[-1]
    assert alone.tier == "critical"
    assert both.tier == "critical", both.metrics
    assert both.metrics["rating_raw"] is not None and both.metrics["rating_raw"] < 80
    assert both.metrics["rating_floor"] == 80.0


histories = st.lists(st.tuples(st.integers(0, 240), st.sampled_from(
    [1.0, 0.999, 0.996, 0.99, 0.985, 0.97, 0.95, 0.94, 0.9, 1.004, 1.01])),
    min_size=1, max_size=120)
others = st.lists(st.tuples(st.integers(0, 240), st.one_of(st.none(), st.floats(0, 500)),
                            st.one_of(st.none(), st.floats(0.8, 1.1))),
                  max_size=60)


@settings(max_examples=60, deadline=None)
@given(prices=histories, extras=others)
def test_other_signals_never_lower_the_tier_below_the_price_floor(
        prices: list[tuple[int, float]], extras: list[tuple[int, float | None, float | None]],
) -> None:
    price_only = [make_tick(T0 + 60 * m, "eth", USDC, "USDC", repr(p), "1")
                  for m, p in dict(prices).items()]
    added = [extra(T0 + 60 * m + 7, s, o) for m, s, o in extras if s is not None or o is not None]
    end = T0 + 60 * 260  # both runs refresh up to the same time
    floor_by_ts = {s.timestamp: s.metrics["rating_floor"]
                   for s in snapshots(run(price_only, until=end))}
    mixed = run(price_only + added, until=end)
    for snap in snapshots(mixed):
        floor = floor_by_ts[snap.timestamp]
        assert floor is not None
        assert snap.rating >= floor
        assert SEVERITY[Tier(snap.tier)] >= SEVERITY[band(floor, CFG)]
        assert tier_matches_band(snap.tier, snap.rating)
    for event in events(mixed):
        assert tier_matches_band(event.data.new_tier, event.data.risk_score)
        assert event.data.price_usd != ""


def test_floors_are_documented_thresholds() -> None:
    # 5 % below for 30 whole minutes: critical by the floor even with the raw rating lower.
    snaps = snapshots(run(price_ticks([1.0] * 60 + [0.945] * 35)))
    at_floor = [s for s in snaps if s.metrics["rating_floor"] == 80.0]
    assert at_floor and all(s.tier == "critical" for s in at_floor)
    # 2 % below for 45 minutes: at least warning.
    snaps = snapshots(run(price_ticks([1.0] * 60 + [0.975] * 50)))
    assert any(s.metrics["rating_floor"] == 60.0 for s in snaps)
    assert SEVERITY[Tier(snaps[-1].tier)] >= SEVERITY[Tier.WARNING]


def test_slippage_only_stream_is_unrated() -> None:
    ticks = [extra(T0 + 60 * i, 900.0, None) for i in range(120)]
    engine = Engine(CFG)
    out = [o for t in ticks for o in engine.process(t)] + engine.flush()
    assert out == []
    assert engine.stats.unrated > 0


def test_prices_without_a_peg_are_unrated() -> None:
    ticks = [make_tick(T0 + 60 * i, "eth", USDC, "USDC", "0.5", None) for i in range(60)]
    engine = Engine(CFG)
    out = [o for t in ticks for o in engine.process(t)] + engine.flush()
    assert out == [] and engine.stats.no_peg == 60


def test_every_event_has_a_price_and_its_tier_is_the_band_of_its_score() -> None:
    ticks = price_ticks([1.0] * 30 + [0.9] * 90 + [1.0] * 300)
    ticks += [extra(T0 + 60 * i + 10, 500.0, 0.8) for i in range(0, 420, 7)]
    out = run(ticks)
    assert [e.data.new_tier for e in events(out)][-1] == "ok"
    for e in events(out):
        assert e.data.price_usd and e.data.peg_usd
        assert tier_matches_band(e.data.new_tier, e.data.risk_score)
    for s in snapshots(out):
        assert tier_matches_band(s.tier, s.rating) and s.band_tier == band(s.rating, CFG)


def test_back_to_ok_within_two_hours_of_the_price_returning() -> None:
    # Critical for hours, then back at peg: ok at most 2 hours after the return.
    minutes_down = 240
    out = run(price_ticks([1.0] * 30 + [0.85] * minutes_down + [1.0] * 300))
    back = T0 + 60 * (30 + minutes_down)
    evs = events(out)
    last = evs[-1]
    assert last.data.new_tier == "ok"
    assert 0 < parse_ts(last.timestamp) - back <= 7200
    # Up at once, then down through the bands one by one, never back up.
    assert [e.data.new_tier for e in evs] == ["warning", "critical", "warning", "watch", "ok"]


def test_above_peg_is_premium_and_not_persistence() -> None:
    # Two hours 1.5 % above peg: premium, rated like a token at peg (the persistence
    # signals count minutes *below* peg only; a premium is not a loss of peg).
    snaps = snapshots(run(price_ticks([1.0] * 30 + [1.015] * 120)))
    last = snaps[-1]
    assert last.tier == "premium" and band(last.rating, CFG) is Tier.OK
    persistence = {s.name: s for s in last.signals if s.name.startswith("persistence")}
    assert all(s.value == 0 and s.score == 0 for s in persistence.values())
    # The mirror image below peg is a depeg.
    below = snapshots(run(price_ticks([1.0] * 30 + [0.985] * 120)))[-1]
    assert below.tier in ("watch", "warning")
    assert all(s.score == 1 for s in below.signals if s.name == "persistence_50bp")


def test_premium_does_not_hide_a_recent_depeg() -> None:
    # A crash, then an overshoot above peg: the held rating keeps the risk band first.
    out = run(price_ticks([1.0] * 30 + [0.85] * 120 + [1.015] * 240))
    tiers = [e.data.new_tier for e in events(out)]
    assert tiers == ["warning", "critical", "warning", "watch", "premium"]


def test_stale_price_is_flagged_in_the_snapshot() -> None:
    engine = Engine(CFG)
    for t in price_ticks([0.97] * 30):
        engine.process(t)
    key = f"eth:{USDC}"
    last = engine.last_tick_ts(key)
    assert last is not None
    snaps = [o for o in engine.advance(key, last + 3600) if isinstance(o, RatingSnapshot)]
    fresh = [s for s in snaps if s.staleness_seconds < CFG.stale_after_seconds]
    stale = [s for s in snaps if s.staleness_seconds >= CFG.stale_after_seconds]
    assert fresh and stale
    assert all(s.metrics["stale"] == 0.0 for s in fresh)
    assert all(s.metrics["stale"] == 1.0 for s in stale)
