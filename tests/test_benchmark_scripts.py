"""Every benchmark script is a command a reader can ask for usage: ``--help`` answers with
its options and exits 0, without running anything (the standard for every process)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

#: The commands: every module with a main guard (the others, such as common.py, are the
#: scripts' shared code: imported, never run).
SCRIPTS = sorted(p.name for p in (REPO / "benchmarks").glob("*.py")
                 if 'if __name__ == "__main__":' in p.read_text())


def test_the_scripts_are_found() -> None:
    assert {"bench_replay.py", "bench_monitor.py", "bench_delivery.py", "report.py",
            "delivery_receivers.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_answers_with_usage(script: str) -> None:
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), "--help"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage: "), done.stdout[:500]
