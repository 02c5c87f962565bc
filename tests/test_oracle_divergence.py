"""Oracle divergence fed end to end: the CSV's oracle column, the simulator's oracles."""

from __future__ import annotations

import bisect
import csv
import itertools
from pathlib import Path

import pytest

from monitor.config import Config
from monitor.records import RatingSnapshot, SignalValue
from monitor.replay import run_replay
from monitor.tickfiles import merge_by_time, read_file
from monitor.ticks import Tick
from monitor.timefmt import parse_ts
from producers.csvout import write_ticks_file
from producers.synthetic import generate, make_tokens
from producers.synthetic_oracle import HEARTBEAT_SECONDS, LAGGING_ORACLE_SECONDS
from tests.conftest import data_file

MARKET = "ticks/usdc_2023-03_binanceus_1m.csv"
CHAINLINK = "ticks/usdc_2022-11_to_2023-03_chainlink.csv"


def headroom(snapshot: RatingSnapshot) -> SignalValue:
    return next(s for s in snapshot.signals if s.name == "headroom")


def _with_oracle_column(tmp_path: Path) -> tuple[Path, list[tuple[float, float]],
                                                 list[tuple[float, float]]]:
    """The real Binance.US minutes and the real Chainlink rounds of USDC in one canonical
    CSV, the Chainlink answers in the optional oracle_price_usd column."""
    rows: list[list[str]] = []
    market, oracle = [], []
    with data_file(MARKET).open(newline="") as fh:
        for r in csv.DictReader(fh):
            if "2023-03-10" <= r["ts"] < "2023-03-12":
                rows.append([r["ts"], r["chain"], r["token"], "USDC", r["price_usd"], "1", "",
                             ""])
                market.append((parse_ts(r["ts"]), float(r["price_usd"])))
    with data_file(CHAINLINK).open(newline="") as fh:
        for r in csv.DictReader(fh):
            if "2023-03-09" <= r["ts"] < "2023-03-12":
                rows.append([r["ts"], r["chain"], r["token"], "USDC", "", "", "", r["price_usd"]])
                oracle.append((parse_ts(r["ts"]), float(r["price_usd"])))
    rows.sort(key=lambda r: parse_ts(r[0]))
    path = tmp_path / "usdc_with_oracle.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["ts", "chain", "token", "symbol", "price_usd", "peg_usd", "slippage_bps",
                    "oracle_price_usd"])
        w.writerows(rows)
    return path, market, oracle


def _latest(series: list[tuple[float, float]], at: float) -> tuple[float, float] | None:
    i = bisect.bisect_right([t for t, _ in series], at)
    return series[i - 1] if i else None


@pytest.mark.data
def test_real_chainlink_rounds_in_the_oracle_column_feed_headroom(tmp_path: Path) -> None:
    path, market, oracle = _with_oracle_column(tmp_path)
    rows = list(read_file(path))
    assert all(isinstance(r, Tick) for r in rows)
    _, ratings, _ = run_replay(iter(rows), Config().model)
    max_age = Config().model.oracle_max_age_seconds
    observed = 0
    for snap in ratings:
        at = parse_ts(snap.timestamp)
        price, answer = _latest(market, at), _latest(oracle, at)
        signal = headroom(snap)
        fresh = price is not None and answer is not None and at - answer[0] <= max_age
        assert signal.observed == fresh, snap.timestamp
        if fresh:
            assert price is not None and answer is not None
            observed += 1
            # Independent recomputation: |market - oracle| / peg, in percent.
            assert signal.value == pytest.approx(abs(price[1] - answer[1]) * 100, abs=1e-9)
            assert snap.metrics["oracle_price_usd"] == answer[1]
    assert observed > 50
    # During the SVB slide (Mar 11, 03:00-08:00) the oracle trailed the market by percents.
    slide = [headroom(s).value or 0.0 for s in ratings
             if "2023-03-11T03" <= s.timestamp < "2023-03-11T08"]
    assert max(slide) > 1.0


def test_the_simulated_depeg_oracle_lags_and_calm_oracles_follow() -> None:
    tokens = make_tokens(5, 7)
    ticks = list(generate(tokens, seed=7, start=1_700_000_000.0, interval=60.0,
                          duration=10 * 3600))
    by_symbol: dict[str, list[Tick]] = {}
    for t in ticks:
        by_symbol.setdefault(t.symbol.split("-", 1)[1], []).append(t)
    for scenario, series in by_symbol.items():
        answers = [t for t in series if t.oracle_price is not None]
        assert answers, scenario
        # A round at least every heartbeat (after the first answer).
        gaps = [b.ts - a.ts for a, b in itertools.pairwise(answers)]
        assert max(gaps) <= HEARTBEAT_SECONDS + 60, scenario
    depeg = by_symbol["depeg"]
    worst = max(abs(price - oracle) / peg for price, oracle, peg in _with_answer(depeg))
    assert worst > 0.01, "the lagging oracle must visibly trail the depeg"
    calm = by_symbol["calm"]
    assert max(abs(price - oracle) / peg for price, oracle, peg in _with_answer(calm)) < 0.004


def _with_answer(series: list[Tick]) -> list[tuple[float, float, float]]:
    """(price, oracle answer, peg) of the ticks that carry all three."""
    return [(t.price, t.oracle_price, t.peg) for t in series
            if t.oracle_price is not None and t.price is not None and t.peg is not None]


def test_simulated_oracles_reach_headroom_through_the_written_csv(tmp_path: Path) -> None:
    tokens = make_tokens(5, 7)
    path = tmp_path / "sim.csv"
    write_ticks_file(generate(tokens, seed=7, start=1_700_000_000.0, interval=60.0,
                              duration=10 * 3600), path)
    _, ratings, _ = run_replay(merge_by_time([read_file(path)]), Config().model)
    depeg = [s for s in ratings if s.symbol.endswith("-depeg")]
    # The lagging oracle's first answer comes LAGGING_ORACLE_SECONDS after the start.
    answered = 1_700_000_000.0 + LAGGING_ORACLE_SECONDS
    assert all(headroom(s).observed for s in depeg if parse_ts(s.timestamp) > answered)
    assert max(headroom(s).score for s in depeg) > 0.5
