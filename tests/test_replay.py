"""Replay on real depegs: the story users would have been told, byte-identical every run."""

from __future__ import annotations

import functools
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.config import ModelConfig
from monitor.records import RatingSnapshot, TierChangeEvent
from monitor.replay import run_replay
from monitor.tickfiles import read_file
from monitor.ticks import Tick
from tests.conftest import data_file
from tests.model_checks import all_clear_failures, tier_matches_band


def replay(relative: str) -> list[TierChangeEvent]:
    return replay_all(relative)[0]


@functools.cache
def replay_all(relative: str) -> tuple[list[TierChangeEvent], list[RatingSnapshot]]:
    """Events and snapshots of one real file (cached: several tests read each file)."""
    events, snaps, summary = run_replay(read_file(data_file(relative)), ModelConfig())
    assert summary.bad_rows == 0
    return events, snaps


def story(events: list[TierChangeEvent]) -> list[tuple[str, str]]:
    return [(e.timestamp, e.data.new_tier) for e in events]


USDC_1M = "ticks/usdc_2023-03_binanceus_1m.csv"
USDC_CHAINLINK = "ticks/usdc_2022-11_to_2023-03_chainlink.csv"
BUSD = "ticks/busd_2023-02_binance_1m.csv"


@pytest.mark.parametrize("relative", [USDC_1M, USDC_CHAINLINK, BUSD])
def test_every_record_of_a_real_file_has_the_band_of_its_rating(relative: str) -> None:
    events, snaps = replay_all(relative)
    assert snaps
    for s in snaps:
        assert tier_matches_band(s.tier, s.rating), s
        assert s.price_usd and s.peg_usd
    for e in events:
        assert tier_matches_band(e.data.new_tier, e.data.risk_score), e
        assert e.data.price_usd and e.data.peg_usd
    assert all(a.data.new_tier == b.data.old_tier for a, b in itertools.pairwise(events))


def test_usdc_march_2023_tells_the_svb_story() -> None:
    events = replay(USDC_1M)
    # Calm 1-10 March; out of ok within 10 minutes of the 1-minute price leaving peg
    # (04:20 on 11 March), critical within 90 minutes; critical while the price is at its
    # worst (0.8748 at 07:50) and all of 11-12 March; stepping down after the Fed's
    # backstop (12 March evening) and back to ok on 13 March.
    assert story(events) == [
        ("2023-03-11T04:30:00Z", "watch"),
        ("2023-03-11T04:35:00Z", "warning"),
        ("2023-03-11T05:50:00Z", "critical"),
        ("2023-03-12T23:50:00Z", "warning"),
        ("2023-03-13T01:50:00Z", "watch"),
        ("2023-03-13T20:15:00Z", "ok"),
    ]


def test_usdc_chainlink_sparse_feed_tells_a_sensible_story() -> None:
    # Calm for months, then the depeg of 11 March escalates to critical (the file ends on
    # 12 March, mid-depeg, so there is no recovery to see). The oracle moved first.
    assert story(replay(USDC_CHAINLINK)) == [
        ("2023-03-11T02:20:00Z", "watch"),
        ("2023-03-11T03:30:00Z", "warning"),
        ("2023-03-11T03:50:00Z", "critical"),
    ]


def test_busd_february_2023_never_leaves_ok() -> None:
    events, snaps = replay_all(BUSD)
    assert events == []
    assert all(s.tier == "ok" for s in snaps)


@pytest.mark.parametrize("relative", [USDC_1M, USDC_CHAINLINK, BUSD])
def test_back_to_ok_within_two_hours_of_an_hour_at_peg(relative: str) -> None:
    path = data_file(relative)
    prices = [(t.ts, t.price / t.peg) for t in read_file(path)
              if isinstance(t, Tick) and t.price is not None and t.peg]
    checked = all_clear_failures(prices, replay_all(relative)[1])
    assert checked.failures == [], checked.failures
    if relative == USDC_1M:
        assert checked.recoveries >= 1  # the SVB recovery of 13 March is among them


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", "replay", *args], cwd=cwd, capture_output=True,
        text=True, timeout=300, env={**os.environ, "DEPEG_LOGGING__FORMAT": "json"},
    )


def test_replay_command_is_byte_identical_across_runs(tmp_path: Path) -> None:
    usdc = data_file("ticks/usdc_2023-03_binanceus_1m.csv")
    busd = data_file("ticks/busd_2023-02_binance_1m.csv")
    outputs = []
    for n in (1, 2):
        out, ratings = tmp_path / f"t{n}.jsonl", tmp_path / f"r{n}.jsonl"
        result = _cli(str(usdc), str(busd), "--out", str(out), "--ratings", str(ratings),
                      cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "ticks read: 53280" in result.stderr
        outputs.append((out.read_bytes(), ratings.read_bytes()))
    assert outputs[0] == outputs[1]
    assert outputs[0][0].count(b"\n") >= 3


def test_bad_rows_are_reported_with_line_numbers(tmp_path: Path) -> None:
    src = tmp_path / "ticks.csv"
    token = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
    src.write_text(
        "ts,chain,token,symbol,price_usd,peg_usd,slippage_bps\n"
        f"2023-03-01T00:00:00Z,eth,{token},USDC,1.0,1,\n"
        f"yesterday,eth,{token},USDC,1.0,1,\n"
        f"2023-03-01T00:01:00Z,eth,{token},USDC,-1,1,\n"
        f"2023-03-01T00:02:00Z,eth,{token},USDC,abc,1,\n"
        f"2023-03-01T00:03:00Z,solana,{token},USDC,1.0,1,\n"
        "2023-03-01T00:04:00Z,eth,0x1234,USDC,1.0,1,\n"
        f"2023-03-01T00:05:00Z,eth,{token},USDC,nan,1,\n"
        f"2023-03-01T00:06:00Z,eth,{token.upper().replace('0X', '0x')},USDC,0.99,1,\n"
    )
    result = _cli(str(src), "--out", str(tmp_path / "out.jsonl"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    err = result.stderr
    assert "ticks read: 2" in err and "bad rows: 6" in err
    for line, reason in [(3, "bad_ts"), (4, "bad_price"), (5, "bad_price"),
                         (6, "unknown_chain"), (7, "bad_address"), (8, "bad_price")]:
        assert f"ticks.csv:{line}: {reason}" in err, err


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    result = _cli("nope.csv", "--out", "x.jsonl", cwd=tmp_path)
    assert result.returncode == 2 and "no such file" in result.stderr
