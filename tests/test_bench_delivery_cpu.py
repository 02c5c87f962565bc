"""``bench_delivery.py``'s CPU per delivery counting every process a delivery takes.

On two cores the worker, its database and the receivers share the CPU, so the script
adds the receivers' CPU (their child process, from /proc) to each side's own. Checked
against the per-round figures the same run prints: the medians recomputed here.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

ROUND = re.compile(r"round \d+ (bare|worker|client)\s+[\d.]+/s\s+errors 0\s+cpu\s+([\d.]+) µs "
                   r"each, receivers\s+([\d.]+)")
EVERY = re.compile(r"every process it takes .*: worker ([\d.]+), bare ([\d.]+); bare / worker "
                   r"([\d.]+)")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_every_process_adds_the_receivers_cpu_to_each_side() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_delivery.py"), "--rounds", "3",
         "--deliveries", "2000", "--isolation-rounds", "0", "--log-level", "warning"],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    own: dict[str, list[float]] = {"bare": [], "worker": [], "client": []}
    served: dict[str, list[float]] = {"bare": [], "worker": [], "client": []}
    for side, cpu, receivers in ROUND.findall(done.stdout):
        own[side].append(float(cpu))
        served[side].append(float(receivers))
    assert all(len(v) == 3 for v in own.values()), done.stdout
    # 2,000 POSTs a round cost the receivers well over /proc's 10 ms resolution.
    assert all(statistics.median(v) > 0 for v in served.values()), served
    found = EVERY.search(done.stdout)
    assert found is not None, done.stdout
    worker, bare, ratio = map(float, found.groups())
    # SQLite: no database server, so the worker's side is this process and the receivers.
    assert worker == pytest.approx(statistics.median(own["worker"])
                                   + statistics.median(served["worker"]), abs=0.2)
    assert bare == pytest.approx(statistics.median(own["bare"])
                                 + statistics.median(served["bare"]), abs=0.2)
    assert ratio == pytest.approx(bare / worker, abs=0.01)
