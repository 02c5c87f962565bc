"""The pure cross-chain spread stage and its gate in the engine."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.config import Config, RegistryConfig
from monitor.engine import Engine
from monitor.records import RatingSnapshot, TierChangeEvent
from monitor.registry import RegistryError, TokenInfo, parse_registry
from monitor.replay import run_replay
from monitor.spread import AssetMap, SpreadStage, asset_map
from monitor.spread.feed import SpreadFeed
from monitor.tickfiles import merge_by_time, read_file
from monitor.ticks import Tick, decode_tick, encode_tick, make_tick

from . import multichain

A, B, C = "0x" + "a" * 40, "0x" + "b" * 40, "0x" + "c" * 40
ASSETS = AssetMap({f"eth:{A}": "usdc", f"arb:{B}": "usdc", f"base:{C}": "usdc"})


def stage(quiet_after: float = 900) -> SpreadStage:
    return SpreadStage(ASSETS, every=300, price_max_age=900, quiet_after=quiet_after)


def chain_ticks(chain: str, token: str, prices: dict[int, str]) -> list[Tick]:
    return [make_tick(ts, chain, token, "USDC", p, "1") for ts, p in sorted(prices.items())]


def spreads(ticks: list[Tick]) -> list[tuple[float, str, float | None, int | None]]:
    return sorted((t.ts, t.key, t.cross_chain_spread_bps, t.cross_chain_chains) for t in ticks)


def test_spread_at_a_boundary_uses_each_chains_latest_price_at_or_before_it() -> None:
    s = stage()
    out = []
    out += s.process(make_tick(250, "eth", A, "USDC", "1.000", "1"))
    out += s.process(make_tick(290, "arb", B, "USDC", "0.990", "1"))
    out += s.process(make_tick(299, "base", C, "USDC", "0.995", "1"))
    # arb runs far ahead at a very different price: boundary 300 must not see it.
    out += s.process(make_tick(310, "arb", B, "USDC", "0.500", "1"))
    out += s.process(make_tick(320, "base", C, "USDC", "0.600", "1"))
    assert out == []  # eth has not passed 300 yet
    out += s.process(make_tick(301, "eth", A, "USDC", "0.700", "1"))
    assert spreads(out) == [(300.0, f"arb:{B}", 100.0, 3), (300.0, f"base:{C}", 100.0, 3),
                            (300.0, f"eth:{A}", 100.0, 3)]
    assert all(t.source == "spread" for t in out)


def test_the_spread_is_relative_to_each_chains_own_peg() -> None:
    s = SpreadStage(AssetMap({f"eth:{A}": "eurc", f"arb:{B}": "eurc"}), every=300,
                    price_max_age=900, quiet_after=900)
    s.process(make_tick(100, "eth", A, "EURC", "1.10", "1.10"))
    s.process(make_tick(100, "arb", B, "EURC", "1.089", "1.10"))
    out = s.process(make_tick(301, "eth", A, "EURC", "1.10", "1.10"))
    out += s.process(make_tick(301, "arb", B, "EURC", "1.10", "1.10"))
    assert {t.cross_chain_spread_bps for t in out} == {100.0}


def test_a_quiet_chain_is_left_out_once_the_others_are_far_enough_ahead() -> None:
    s = stage(quiet_after=600)
    out = []
    for ts in range(0, 3001, 60):
        out += s.process(make_tick(ts, "eth", A, "USDC", "1.00", "1"))
        out += s.process(make_tick(ts + 1, "arb", B, "USDC", "0.98", "1"))
        if ts < 400:
            out += s.process(make_tick(ts + 2, "base", C, "USDC", "0.99", "1"))
    by_ts: dict[float, set[tuple[float | None, int | None]]] = {}
    for t in out:
        by_ts.setdefault(t.ts, set()).add((t.cross_chain_spread_bps, t.cross_chain_chains))
    assert by_ts[300.0] == {(200.0, 3)}
    # base's last price (ts 362) is fresh until 1262: still in the spread, then dropped.
    assert by_ts[1200.0] == {(200.0, 3)}
    assert by_ts[1500.0] == {(200.0, 2)}
    # Boundaries wait quiet_after for base: the last published is 3000 - 600 - slack.
    assert max(by_ts) == 2400.0
    # Every token of the asset (the quiet one too) gets every boundary.
    assert len(out) == 3 * len(by_ts)


def test_a_quiet_chain_holds_the_boundary_until_the_reader_is_caught_up() -> None:
    s = stage(quiet_after=300)
    s.process(make_tick(10, "base", C, "USDC", "1", "1"))
    s.process(make_tick(10, "eth", A, "USDC", "1", "1"))
    assert s.process(make_tick(700, "eth", A, "USDC", "1", "1"), lambda: False) == []
    assert len(s.process(make_tick(701, "eth", A, "USDC", "1", "1"), lambda: True)) == 2


def test_release_publishes_what_waited_for_the_catch_up_once_and_only_then() -> None:
    ticks = [make_tick(10, "base", C, "USDC", "1", "1"), make_tick(10, "eth", A, "USDC", "1", "1"),
             make_tick(700, "eth", A, "USDC", "1", "1")]
    replay = stage(quiet_after=300)  # the truth: a replay is always caught up
    expected = [t for tick in ticks for t in replay.process(tick)]
    assert expected
    s = stage(quiet_after=300)
    assert [t for tick in ticks for t in s.process(tick, lambda: False)] == []
    assert s.release(lambda: False) == []  # not caught up yet: still waiting
    assert spreads(s.release(lambda: True)) == spreads(expected)
    assert s.release(lambda: True) == []  # published once


def test_fewer_than_two_fresh_chains_is_no_spread_but_still_an_observation() -> None:
    s = stage()
    s.process(make_tick(10, "eth", A, "USDC", "1", "1"))
    out = s.process(make_tick(400, "eth", A, "USDC", "1", "1"))
    assert [(t.cross_chain_spread_bps, t.cross_chain_chains) for t in out] == [(None, 1)]
    assert decode_tick(encode_tick(out[0])) == out[0]  # valid on the wire


def test_late_ticks_own_output_and_other_tokens_are_ignored() -> None:
    s = stage()
    s.process(make_tick(10, "eth", A, "USDC", "1", "1"))
    out = s.process(make_tick(400, "eth", A, "USDC", "1", "1"))
    assert s.process(make_tick(200, "arb", B, "USDC", "0.9", "1")) == []
    assert s.stats.late == 1
    assert s.process(out[0]) == []
    assert s.process(make_tick(900, "eth", "0x" + "d" * 40, "X", "1", "1")) == []


def test_single_chain_assets_are_not_compared() -> None:
    tokens = [TokenInfo("eth", A, "USDC", asset="usdc"), TokenInfo("arb", B, "USDC",
                                                                     asset="usdc"),
              TokenInfo("eth", C, "PYUSD", asset="pyusd"), TokenInfo("eth", "0x" + "e" * 40,
                                                                     "DAI")]
    assert asset_map(tokens).asset_of == {f"eth:{A}": "usdc", f"arb:{B}": "usdc"}


def test_registry_asset_ids_are_validated() -> None:
    with pytest.raises(RegistryError, match="asset"):
        parse_registry(f'[[token]]\nchain="eth"\naddress="{A}"\nsymbol="X"\nasset="U SD"\n')


def _market(seed: int) -> dict[str, list[Tick]]:
    rng = random.Random(seed)
    per_chain = {}
    for chain, token in (("eth", A), ("arb", B), ("base", C)):
        ts, ticks = 0.0, []
        while ts < 4000:
            ts += rng.choice((7.0, 30.0, 61.0, 240.0))
            ticks.append(make_tick(ts, chain, token, "USDC", f"{rng.uniform(0.95, 1.01):.5f}",
                                   "1"))
        per_chain[chain] = ticks
    return per_chain


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), order=st.randoms(use_true_random=False))
def test_any_interleaving_of_the_chains_gives_the_same_observations(
        seed: int, order: random.Random) -> None:
    """The daemon reads partitions in whatever interleaving the broker hands out; the
    time-merged replay order is just one of them."""
    per_chain = _market(seed)
    merged = sorted((t for ts in per_chain.values() for t in ts), key=lambda t: t.ts)
    s1 = stage()
    expected = [o for t in merged for o in s1.process(t)] + s1.flush()
    queues = [list(ts) for ts in per_chain.values()]
    s2 = stage()
    got: list[Tick] = []
    while any(queues):
        q = order.choice([q for q in queues if q])
        # Caught up only when every chain's queue is drained (as the daemon's reader is).
        got += s2.process(q.pop(0), lambda: not any(queues))
    got += s2.flush()
    assert spreads(got) == spreads(expected)


def test_state_export_and_restore_continue_exactly() -> None:
    per_chain = _market(3)
    merged = sorted((t for ts in per_chain.values() for t in ts), key=lambda t: t.ts)
    whole = stage()
    expected = [o for t in merged for o in whole.process(t)]
    first = stage()
    got = [o for t in merged[:100] for o in first.process(t)]
    second = stage()
    second.restore_state(first.export_state())
    got += [o for t in merged[100:] for o in second.process(t)]
    assert got == expected


def _config(tmp_path: Path) -> tuple[Config, list[Path]]:
    registry, files = multichain.build(tmp_path)
    return Config(registry=RegistryConfig(path=str(registry))), files


@pytest.mark.data
def test_gated_engine_gives_the_same_output_whatever_the_spread_ticks_arrival(
        tmp_path: Path) -> None:
    """The daemon's worst case: a token's market ticks all arrive before any of its spread
    ticks (the stage lagged). The gate must make that identical to the replay's order."""
    config, files = _config(tmp_path)
    merged = [r for r in merge_by_time(read_file(p) for p in files) if isinstance(r, Tick)]
    feed = SpreadFeed(config)
    expected = [o for t in merged for o in feed.process(t)]
    assert feed.stage is not None and feed.stage.stats.published > 0
    spread_stage = SpreadFeed(config).stage
    assert spread_stage is not None
    stage_out = [o for t in merged for o in spread_stage.process(t)]
    engine = Engine(config.model, spread_gated=frozenset(multichain.KEYS))
    got = []
    for key in multichain.KEYS:
        got += [o for t in merged if t.key == key for o in engine.process(t)]
        got += [o for t in stage_out if t.key == key for o in engine.process(t)]
    assert sorted(map(msgspec.json.encode, got)) == sorted(map(msgspec.json.encode, expected))
    assert any(isinstance(o, TierChangeEvent) for o in expected)


@pytest.mark.data
def test_replay_feeds_the_spread_into_headroom_deterministically(tmp_path: Path) -> None:
    config, files = _config(tmp_path)

    def replay() -> tuple[list[TierChangeEvent], list[RatingSnapshot]]:
        events, ratings, summary = run_replay(merge_by_time(read_file(p) for p in files),
                                              config.model, config=config)
        assert summary.spread_observations > 0
        return events, ratings

    events, ratings = replay()
    assert replay() == (events, ratings)
    peak = max((r for r in ratings if r.metrics.get("cross_chain_spread_pct") is not None),
               key=lambda r: r.metrics["cross_chain_spread_pct"] or 0.0)
    headroom = next(s for s in peak.signals if s.name == "headroom")
    # arb trails eth by three minutes through the SVB slide: a spread of whole percents.
    spread = peak.metrics["cross_chain_spread_pct"]
    assert spread is not None and spread > 1.0
    assert headroom.observed and headroom.value == pytest.approx(spread)
    # Without the registry, no spread: headroom is unobserved (no oracle in these files).
    _, plain, _ = run_replay(merge_by_time(read_file(p) for p in files), config.model)
    assert all(not next(s for s in r.signals if s.name == "headroom").observed for r in plain)


@pytest.mark.data
def test_a_gated_token_state_restores_with_its_spread_mark(tmp_path: Path) -> None:
    """The daemon checkpoints a gated token between its ticks and its spread observations;
    the restored engine must continue exactly (held ticks, spread mark and all)."""
    config, files = _config(tmp_path)
    merged = [r for r in merge_by_time(read_file(p) for p in files) if isinstance(r, Tick)]
    feed = SpreadFeed(config)
    assert feed.stage is not None
    fed: list[Tick] = []
    for t in merged:
        fed.append(t)
        fed.extend(feed.stage.process(t))
    gated = frozenset(multichain.KEYS)
    whole = Engine(config.model, spread_gated=gated)
    expected = [msgspec.json.encode(o) for t in fed for o in whole.process(t)]
    cut = len(fed) // 2
    first = Engine(config.model, spread_gated=gated)
    got = [msgspec.json.encode(o) for t in fed[:cut] for o in first.process(t)]
    second = Engine(config.model, spread_gated=gated)
    for key in first.keys():
        second.restore_state(first.export_state(key))
    got += [msgspec.json.encode(o) for t in fed[cut:] for o in second.process(t)]
    assert got == expected


def test_an_opened_gate_rates_without_the_spread_and_closes_when_it_catches_up() -> None:
    key = f"eth:{A}"
    engine = Engine(Config().model, spread_gated=frozenset({key}))
    out = [o for ts in range(0, 3600, 60)
           for o in engine.process(make_tick(ts, "eth", A, "USDC", "0.97", "1"))]
    assert out == [] and engine.spread_lag(key) == float("inf")  # held: no spread yet
    opened = engine.open_gate(key)
    assert [o.timestamp for o in opened if isinstance(o, RatingSnapshot)][-1] == \
        "1970-01-01T00:55:00Z"  # every boundary up to max_seen - lateness
    # Late spread observations are dropped; a current one closes the gap.
    assert engine.process(make_tick(300, "eth", A, "USDC", cross_chain_chains=1,
                                    source="spread")) == []
    engine.process(make_tick(3540, "eth", A, "USDC", cross_chain_spread_bps=30,
                             cross_chain_chains=2, source="spread"))
    assert engine.spread_lag(key) == 0.0


def test_the_shipped_registry_names_multichain_assets_and_bad_ids_are_reported() -> None:
    import copy
    import json

    from monitor.registry import load_registry
    from monitor.tokenlist import check_tokenlist

    path = Path(__file__).resolve().parents[2] / "deploy/registry/pegged-tokens.tokenlist.json"
    assets = asset_map(load_registry(path)).asset_of
    usdc = {key.split(":")[0] for key, asset in assets.items() if asset == "usdc"}
    assert {"eth", "arb", "base", "opt", "pol"} <= usdc
    assert set(assets.values()) == {"usdc", "usdt", "dai"}
    doc = json.loads(path.read_text())
    assert check_tokenlist(doc).errors == []
    bad = copy.deepcopy(doc)
    bad["tokens"][0]["extensions"]["asset"] = "Not An Id"
    assert any("extensions.asset" in e for e in check_tokenlist(bad).errors)
