"""CLI start-up: ``depeg-monitor --help`` next to ``python -c pass`` (its limit).

    python benchmarks/bench_cli.py [--rounds 7] [--command-rounds 3]

Both are run as fresh processes, alternately, ``--rounds`` times; prints min/median/max
wall time of each, the difference, and whether the median ``--help`` is under 0.3 s
(the target). Then every command's own ``--help``, and every producer's (``produce NAME
--help``): each imports its command module, so a command that imports its whole stack at
module level shows here; ``--command-rounds``
times each, interleaved the same way, with a second result line for the slowest.
A non-zero exit or a help without ``usage:`` fails the run. Both sides run as installed:
the project's modules byte-compiled once into a temporary ``PYTHONPYCACHEPREFIX``,
``PYTHONDONTWRITEBYTECODE`` unset (a line says whether the children loaded that bytecode).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import (
    bytecode_line,
    emit,
    fail_on_errors,
    installed_env,
    machine_line,
    show,
    warm_bytecode,
)

from monitor.command_index import HELP
from producers.command import PRODUCERS

TARGET_SECONDS = 0.3


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, bool]:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    elapsed = time.perf_counter() - started
    ok = done.returncode == 0 and (argv[-1] != "--help" or "usage:" in done.stdout)
    return elapsed, ok


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        return measure(tmp)


def measure(tmp: str) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--command-rounds", type=int, default=3,
                        help="rounds over every command's --help")
    args = parser.parse_args()
    # The script installed next to this interpreter (the checkout being measured), not
    # whichever depeg-monitor comes first on PATH (another checkout's, perhaps).
    beside = Path(sys.executable).with_name("depeg-monitor")
    cli = str(beside) if beside.exists() else shutil.which("depeg-monitor") or str(beside)
    print(machine_line())
    # Both sides as installed: project .pyc files compiled once (common.installed_env).
    env = installed_env(tmp)
    commands = [*sorted(HELP), "config", *(f"produce {p}" for p in PRODUCERS)]
    print(bytecode_line("python -c pass", *warm_bytecode([sys.executable, "-c", "pass"], env)))
    for name in ["", *commands]:
        cached, compiled = warm_bytecode([cli, *name.split(), "--help"], env)
        if compiled or not name:
            print(bytecode_line(f"depeg-monitor {name} --help".replace("  ", " "), cached,
                                compiled))
    bare: list[float] = []
    project: list[float] = []
    errors = 0
    for n in range(args.rounds):
        order = [[sys.executable, "-c", "pass"], [cli, "--help"]]
        for argv in order if n % 2 == 0 else order[::-1]:
            elapsed, ok = timed(argv, env)
            errors += not ok
            (bare if argv[-1] == "pass" else project).append(elapsed * 1000)
    print(show("python -c pass", bare, "ms"))
    print(show("depeg-monitor --help", project, "ms"))
    median = statistics.median(project) / 1000
    over = statistics.median(project) - statistics.median(bare)
    print(f"--help median {median:.3f} s, {over:.0f} ms over python -c pass "
          f"(target < {TARGET_SECONDS} s)")
    fail_on_errors(errors, "the --help runs")
    emit("CLI start (`depeg-monitor --help`)", unit="ms", limit_name="python -c pass",
         limit=bare, project=project,
         ratio=statistics.median(project) / statistics.median(bare),
         target=f"< {TARGET_SECONDS} s", met=median < TARGET_SECONDS)

    # Each command's --help, in rounds over all commands (so a busy moment of the
    # machine spreads over every command instead of landing on one).
    # ``produce`` imports each producer's module for that producer's --help: each counts.
    per_command: dict[str, list[float]] = {name: [] for name in commands}
    bare_sub: list[float] = []
    for n in range(args.command_rounds):
        names = list(per_command) if n % 2 == 0 else list(per_command)[::-1]
        for name in names:
            elapsed, ok = timed([cli, *name.split(), "--help"], env)
            errors += not ok
            per_command[name].append(elapsed * 1000)
            elapsed, ok = timed([sys.executable, "-c", "pass"], env)
            errors += not ok
            bare_sub.append(elapsed * 1000)
    for name, times in per_command.items():
        print(show(f"depeg-monitor {name} --help", times, "ms"))
    print(show("python -c pass (between them)", bare_sub, "ms"))
    slowest = max(per_command, key=lambda name: statistics.median(per_command[name]))
    worst = per_command[slowest]
    fail_on_errors(errors, "the start-up runs")
    emit(f"CLI start (`depeg-monitor <command> --help`, slowest: {slowest})", unit="ms",
         limit_name="python -c pass", limit=bare_sub, project=worst,
         ratio=statistics.median(worst) / statistics.median(bare_sub),
         target=f"< {TARGET_SECONDS} s",
         met=statistics.median(worst) / 1000 < TARGET_SECONDS,
         note=", ".join(f"{name} {statistics.median(t):.0f} ms"
                        for name, t in sorted(per_command.items(),
                                              key=lambda item: -statistics.median(item[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
