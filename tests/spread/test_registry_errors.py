"""An unreadable token registry: the monitor rates without spread, the stage says why it
is not ready, replay refuses with the reason."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from monitor.config import Config, RegistryConfig
from monitor.daemon import MonitorDaemon
from monitor.replay import command
from monitor.spread.service import SpreadDaemon


def bad_config(tmp_path: Path) -> Config:
    path = tmp_path / "tokens.toml"
    path.write_text('[[token]]\nchain = "eth"\naddress = "0x12"\nsymbol = "X"\n')
    return Config(registry=RegistryConfig(path=str(path)))


async def test_the_monitor_runs_ungated_and_the_stage_is_not_ready(tmp_path: Path) -> None:
    config = bad_config(tmp_path)
    assert MonitorDaemon(config)._spread_gated == frozenset()
    ok, detail = await SpreadDaemon(config).check()
    assert not ok and "token registry unreadable" in detail and "0x12" in detail


def test_replay_refuses_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ticks = tmp_path / "t.csv"
    ticks.write_text("ts,chain,token,symbol,price_usd,peg_usd,slippage_bps\n"
                     f"2023-03-11T00:00:00Z,eth,0x{'a' * 40},X,1,1,\n")
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args([str(ticks), "--out", str(tmp_path / "out.jsonl")])
    assert command.run(args, bad_config(tmp_path)) == 2
    assert "0x12" in capsys.readouterr().err
