"""A service stopped while it is still starting exits 0, as a stop after start does.

The child process sends itself the signal from inside the import of ``aiokafka`` (an
import hook installed before ``depeg-monitor`` runs): that is the window between the CLI
choosing a service and the service's event loop handling signals, hit deterministically
rather than by a timed race.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from monitor.command_index import is_service

CHILD = """
import os, signal, sys
import importlib.abc

class SignalOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "aiokafka":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), {signum})
        return None

sys.meta_path.insert(0, SignalOnImport())
from monitor.cli import main
sys.argv = ["depeg-monitor", *sys.argv[1:]]
sys.exit(main())
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("service", ["monitor", "deliver", "store", "vaults"])
def test_a_signal_while_a_service_starts_exits_0(service: str, signum: signal.Signals,
                                                 tmp_path: object) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(signum=int(signum)), "--data-dir", str(tmp_path),
         service],
        capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": "/usr/bin:/bin", "DEPEG_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1"})
    assert done.returncode == 0, done.stderr
    assert f"{signum.name} before the service started" in done.stderr
    assert "Traceback" not in done.stderr




def test_jobs_over_files_keep_the_default_action() -> None:
    """``replay`` and ``vaults replay`` did not finish their files when signalled, so they
    must not report success: they keep the signal's default action."""
    assert not is_service("replay", ["replay", "a.csv"])
    assert not is_service("vaults", ["vaults", "replay", "facts.jsonl"])
    assert is_service("vaults", ["vaults", "--group", "g"])
