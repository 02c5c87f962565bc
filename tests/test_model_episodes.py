"""Raw real episodes beyond the shared tick files, converted into temporary tick files:
calm before, out of ok early, the worst tier at the worst price, ok soon after recovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.config import ModelConfig
from monitor.records import TierChangeEvent
from monitor.replay import run_replay
from monitor.tickfiles import read_file
from monitor.timefmt import parse_ts
from tests.conftest import data_file
from tests.model_checks import binance_klines, chainlink_rounds, tier_matches_band

pytestmark = pytest.mark.data

USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
BUSD = "0x4fabb145d64652a948d72533023f6e7a623c7c53"
USDN = "0x674c6ad92fd080e4004b2312b45f796a192d27a0"


def transitions(path: Path) -> list[TierChangeEvent]:
    events, _, summary = run_replay(read_file(path), ModelConfig(), snapshots=False)
    assert summary.bad_rows == 0
    for e in events:
        assert tier_matches_band(e.data.new_tier, e.data.risk_score), e
    return events


def tier_at(events: list[TierChangeEvent], ts: float) -> str:
    tier = "ok"
    for e in events:
        if parse_ts(e.timestamp) <= ts:
            tier = e.data.new_tier
    return tier


def test_busd_november_2022_ftx_week_is_a_premium_not_a_depeg(tmp_path: Path) -> None:
    # In the FTX week BUSD traded up to 0.8 % above USDT for hours on 10 November: one
    # premium episode, never a below-peg tier.
    raw = data_file("raw/binance_BUSDUSDT_1m_2022-11-06_to_11-14.csv")
    events = transitions(binance_klines(raw, tmp_path / "busd.csv", BUSD, "BUSD"))
    assert [(e.data.old_tier, e.data.new_tier) for e in events] == [
        ("ok", "premium"), ("premium", "ok")]
    assert all(e.timestamp.startswith("2022-11-10") for e in events)


def test_usdc_usdt_relisting_is_critical_at_once_and_ok_after_recovery(tmp_path: Path) -> None:
    # Binance USDC/USDT from its relisting at 0.882 on 11 March 14:00 to 20 March.
    raw = data_file("raw/binance_USDCUSDT_1m_2023-03-11T14_to_2023-03-20.csv")
    events = transitions(binance_klines(raw, tmp_path / "usdc.csv", USDC, "USDC"))
    tiers = [e.data.new_tier for e in events]
    assert tiers == ["watch", "warning", "critical", "warning", "watch", "ok"]
    assert parse_ts(events[2].timestamp) - parse_ts("2023-03-11T14:00:00Z") <= 3600
    assert events[-1].timestamp < "2023-03-14"


def test_usdn_april_2022_oracle_is_critical_at_its_worst(tmp_path: Path) -> None:
    # Chainlink USDN/USD rounds around the April 2022 crash (low 0.725 on 4 April 18:23).
    raw = data_file("raw/chainlink_USDN_USD_eth_rounds_to_2022-11.csv")
    events = transitions(chainlink_rounds(raw, tmp_path / "usdn.csv", USDN, "USDN",
                                          "2022-03-28", "2022-04-20"))
    assert tier_at(events, parse_ts("2022-04-04T18:30:00Z")) == "critical"
    assert tier_at(events, parse_ts("2022-03-31T00:00:00Z")) == "ok"  # calm before
    assert len(events) <= 6
