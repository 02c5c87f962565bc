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
