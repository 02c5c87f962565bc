"""Commands on a fresh machine with nothing configured: each says what to set and exits 2
(QA found ``produce chain`` exiting 0 having done nothing, ``deliver`` exiting 1 on a
connection error to 127.0.0.1:9092)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("extra", [["--once"], [], ["--chain", "arb", "--once"]])
def test_produce_chain_without_rpc_urls_says_what_to_set(tmp_path: Path,
                                                         extra: list[str]) -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DEPEG_CHAINS__") and k != "DEPEG_CONFIG"}
    env |= {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    done = subprocess.run([str(Path(sys.executable).parent / "depeg-monitor"), "produce",
                           "chain", *extra], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "no chain has rpc_urls configured" in done.stderr
    assert "DEPEG_CHAINS__ETH__RPC_URLS" in done.stderr


def test_deliver_without_a_broker_names_the_setting(tmp_path: Path) -> None:
    """``depeg-monitor deliver`` alone, no broker and no ``run``: exit 2 with a hint, as
    ``monitor``, ``spread`` and ``vaults`` do (QA: it tried 127.0.0.1:9092 and exited 1)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DEPEG_KAFKA__") and k != "DEPEG_CONFIG"}
    env |= {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
            "DEPEG_METRICS__PORT": "0", "DEPEG_LOGGING__FORMAT": "json"}
    done = subprocess.run([str(Path(sys.executable).parent / "depeg-monitor"), "deliver"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert '"event": "delivery.no_broker"' in done.stderr
    assert "bootstrap-servers" in done.stderr


def _isolated_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DEPEG_KAFKA__") and k != "DEPEG_CONFIG"}
    return env | {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
                  "DEPEG_METRICS__PORT": "0", "DEPEG_LOGGING__FORMAT": "json"}


def _ticks_file(tmp_path: Path) -> Path:
    path = tmp_path / "ticks.csv"
    path.write_text("ts,chain,token,symbol,price_usd,peg_usd,slippage_bps\n"
                    "2023-03-11T00:00:00Z,eth,0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48,"
                    "USDC,1,1,\n")
    return path


#: Every command that needs a broker (README, "Exit codes"). ``produce simulate`` and
#: ``store`` exited 1 here while the daemons exited 2.
BROKER_COMMANDS = [
    ["monitor"], ["spread"], ["vaults"], ["deliver"], ["store"],
    ["produce", "simulate", "--tokens", "2", "--duration", "1"],
    ["produce", "replay", "{ticks}"],
    ["produce", "vaults", "simulate", "--vaults", "2"],
]


@pytest.mark.parametrize("argv", BROKER_COMMANDS, ids=" ".join)
def test_no_broker_configured_is_exit_2_naming_the_setting(tmp_path: Path,
                                                          argv: list[str]) -> None:
    ticks = _ticks_file(tmp_path)
    argv = [a.replace("{ticks}", str(ticks)) for a in argv]
    done = subprocess.run([str(Path(sys.executable).parent / "depeg-monitor"), *argv],
                          cwd=tmp_path, env=_isolated_env(tmp_path), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "bootstrap_servers" in done.stderr.lower() or "bootstrap-servers" in done.stderr


@pytest.mark.parametrize("argv", [
    ["deliver"], ["store"], ["produce", "simulate", "--tokens", "2", "--duration", "1"],
], ids=" ".join)
def test_unreachable_broker_is_exit_1_in_one_line(tmp_path: Path, argv: list[str]) -> None:
    """A configured broker that refuses connections is a runtime failure: exit 1 and one
    error line naming the setting (``deliver`` died with aiokafka's traceback)."""
    env = _isolated_env(tmp_path) | {"DEPEG_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    done = subprocess.run([str(Path(sys.executable).parent / "depeg-monitor"), *argv],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "127.0.0.1:1" in done.stderr
