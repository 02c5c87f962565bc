"""A service stopped while it is still starting exits 0, as a stop after start does, and
never starts: the stop is kept until its event loop handles signals (monitor/earlystop.py).

The child process sends itself the signal from inside the import of ``aiokafka`` (an
import hook installed before ``depeg-monitor`` runs): that is the window between the CLI
choosing a service and the service's event loop handling signals, hit deterministically
rather than by a timed race. A second variant sends it inside code that swallows every
exception, as an import can lose one raised by a signal handler (Python 3.11 did, inside
``compile()``): a handler that raised ``SystemExit`` left that service running.
"""

from __future__ import annotations

import json
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
            if {swallow}:
                try:
                    os.kill(os.getpid(), {signum})
                    for _ in range(1000):  # the handler runs between these steps
                        pass
                except BaseException:
                    pass
            else:
                os.kill(os.getpid(), {signum})
        return None

sys.meta_path.insert(0, SignalOnImport())
from monitor.cli import main
sys.argv = ["depeg-monitor", *sys.argv[1:]]
sys.exit(main())
"""


def started_and_signalled(service: str, signum: signal.Signals, swallow: bool,
                          tmp_path: object) -> subprocess.CompletedProcess[str]:
    """The service's process, signalled while it imports aiokafka. The broker address
    answers nothing: a service that went on to start would retry it until the timeout."""
    return subprocess.run(
        [sys.executable, "-c", CHILD.format(signum=int(signum), swallow=swallow),
         "--data-dir", str(tmp_path), "--log-format", "json", service],
        capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": "/usr/bin:/bin", "DEPEG_KAFKA__BOOTSTRAP_SERVERS": "127.0.0.1:1",
             "DEPEG_METRICS__PORT": "0"})


@pytest.mark.parametrize("swallow", [False, True], ids=["raised", "swallowed"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("service", ["monitor", "deliver", "store", "vaults", "run", "api"])
def test_a_signal_while_a_service_starts_exits_0(service: str, signum: signal.Signals,
                                                 swallow: bool, tmp_path: object) -> None:
    done = started_and_signalled(service, signum, swallow, tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"{signum.name} before the service started" in done.stderr
    assert "Traceback" not in done.stderr
    events = [json.loads(line)["event"] for line in done.stderr.splitlines()
              if line.startswith("{")]
    # It stopped before starting anything: no ops server, no broker connection.
    component = "run" if service == "run" else "service"
    assert events[-1:] == [f"{component}.stopped_before_start"], done.stderr
    assert "ops.server_started" not in events


def test_jobs_over_files_keep_the_default_action() -> None:
    """``replay`` and ``vaults replay`` did not finish their files when signalled, so they
    must not report success: they keep the signal's default action."""
    assert not is_service("replay", ["replay", "a.csv"])
    assert not is_service("vaults", ["vaults", "replay", "facts.jsonl"])
    assert is_service("vaults", ["vaults", "--group", "g"])
