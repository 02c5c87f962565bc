"""``depeg-monitor produce chain`` on a fresh machine, with no chain configured: it says
what to set and exits 2 (QA found it exited 0 having done nothing, with one INFO line)."""

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
