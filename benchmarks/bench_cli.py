"""CLI start-up: ``depeg-monitor --help`` next to ``python -c pass`` (its limit).

    python benchmarks/bench_cli.py [--rounds 7]

Both are run as fresh processes, alternately, ``--rounds`` times; prints min/median/max
wall time of each, the difference, and whether the median ``--help`` is under 0.3 s
(the target). A non-zero exit or empty help fails the run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

from common import emit, fail_on_errors, machine_line, show

TARGET_SECONDS = 0.3


def timed(argv: list[str]) -> tuple[float, bool]:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    ok = done.returncode == 0 and (argv[-1] != "--help" or "usage:" in done.stdout)
    return elapsed, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    cli = shutil.which("depeg-monitor") or str(
        __import__("pathlib").Path(sys.executable).with_name("depeg-monitor"))
    print(machine_line())
    bare: list[float] = []
    project: list[float] = []
    errors = 0
    for n in range(args.rounds):
        order = [[sys.executable, "-c", "pass"], [cli, "--help"]]
        for argv in order if n % 2 == 0 else order[::-1]:
            elapsed, ok = timed(argv)
            errors += not ok
            (bare if argv[-1] == "pass" else project).append(elapsed * 1000)
    print(show("python -c pass", bare, "ms"))
    print(show("depeg-monitor --help", project, "ms"))
    median = statistics.median(project) / 1000
    over = statistics.median(project) - statistics.median(bare)
    print(f"--help median {median:.3f} s, {over:.0f} ms over python -c pass "
          f"(target < {TARGET_SECONDS} s)")
    fail_on_errors(errors, "the start-up runs")
    emit("CLI start (`depeg-monitor --help`)", unit="ms", limit_name="python -c pass",
         limit=bare, project=project,
         ratio=statistics.median(project) / statistics.median(bare),
         target=f"< {TARGET_SECONDS} s", met=median < TARGET_SECONDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
