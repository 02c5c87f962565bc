"""Replay on real depegs: the story users would have been told, byte-identical every run."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from conftest import data_file

from monitor.config import ModelConfig
from monitor.records import TierChangeEvent
from monitor.replay import run_replay
from monitor.tickfiles import read_file


def replay(relative: str) -> list[TierChangeEvent]:
    events, _, summary = run_replay(read_file(data_file(relative)), ModelConfig())
    assert summary.bad_rows == 0
    return events


def day(e: TierChangeEvent) -> datetime:
    return datetime.fromisoformat(e.timestamp.replace("Z", "+00:00"))


def test_usdc_march_2023_tells_the_svb_story() -> None:
    events = replay("ticks/usdc_2023-03_binanceus_1m.csv")
    assert len(events) <= 8, [(e.timestamp, e.data.new_tier) for e in events]
    # Nothing from 1 to 9 March.
    assert all(day(e) >= datetime(2023, 3, 10, tzinfo=UTC) for e in events)
    first = events[0]
    assert first.data.old_tier == "ok"
    assert day(first).date().isoformat() == "2023-03-11" and day(first).hour < 12
    critical = [e for e in events if e.data.new_tier == "critical"]
    assert critical and day(critical[0]).date().isoformat() == "2023-03-11"
    # Back to ok by 14 March, and quiet after.
    last = events[-1]
    assert last.data.new_tier == "ok" and day(last) < datetime(2023, 3, 14, tzinfo=UTC)
    # Tiers chain: each event starts where the previous one ended.
    assert all(a.data.new_tier == b.data.old_tier for a, b in itertools.pairwise(events))


def test_usdc_chainlink_sparse_feed_tells_a_sensible_story() -> None:
    events = replay("ticks/usdc_2022-11_to_2023-03_chainlink.csv")
    # Calm for months, then the depeg of 11 March escalates to critical (the file ends on
    # 12 March, mid-depeg, so there is no recovery to see).
    assert events and all(day(e) >= datetime(2023, 3, 10, tzinfo=UTC) for e in events)
    assert events[-1].data.new_tier == "critical"
    assert len(events) <= 6


def test_busd_february_2023_never_leaves_ok() -> None:
    assert replay("ticks/busd_2023-02_binance_1m.csv") == []


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
