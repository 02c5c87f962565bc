"""Replay CPU time against a bare ``csv.reader`` pass over the same files, and memory per token.

    python benchmarks/bench_replay.py [--rounds N] [FILE ...]

Default files: the three shared real tick files (../shared/data/ticks/*.csv), merged by
time as ``depeg-monitor replay`` merges them. Each round runs, interleaved, the limit (a
bare ``csv.reader`` pass over every file) and the project (the replay command's path:
parse + validate, merge, engine, spread stage, JSON encoding of the outputs), without and
with rating snapshots (``--ratings``). CPU time (``time.process_time``), so a loaded
machine distorts the ratio less than wall time would. Prints min/median/max per side and
the ratio of medians. Targets (issue 15): replay <= 5x the bare pass (then 3x); under
20 KB of window state per token. Counts bad rows as errors and exits 1 on any.
"""

from __future__ import annotations

import csv
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from monitor.config import Config, ModelConfig
from monitor.engine import Engine
from monitor.records import encode
from monitor.replay import run_replay
from monitor.tickfiles import merge_by_time, read_file
from monitor.ticks import make_tick

DATA = Path(__file__).resolve().parents[2] / "shared/data/ticks"


def bare_csv(path: Path) -> None:
    with path.open(newline="") as fh:
        for _ in csv.reader(fh):
            pass


def memory_per_token(tokens: int = 2000, ticks_per_token: int = 180) -> float:
    """Bytes of engine state per token after each token has seen three hours of ticks."""
    ticks = [
        make_tick(1_700_000_000 + i * 60, "eth", f"0x{n:040x}", "T", f"{1 - (i % 7) * 1e-4:.6f}",
                  "1", "5" if i % 10 == 0 else None)
        for i in range(ticks_per_token) for n in range(tokens)
    ]
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    engine = Engine(ModelConfig())
    for t in ticks:
        engine.process(t)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    return grown / tokens


def replay_encoded(paths: list[Path], snapshots: bool) -> int:
    """The replay command's work minus the file writes: returns the bad rows seen."""
    config = Config()
    events, ratings, summary = run_replay(merge_by_time(read_file(p) for p in paths),
                                          config.model, snapshots=snapshots, config=config)
    for record in (*events, *ratings):
        encode(record)
    return summary.bad_rows


def cpu(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> int:
    args = sys.argv[1:]
    rounds = 3
    if args[:1] == ["--rounds"]:
        rounds, args = max(3, int(args[1])), args[2:]
    paths = [Path(a) for a in args] or sorted(DATA.glob("*.csv"))
    if not paths or not all(p.exists() for p in paths):
        print(f"skip: tick files not found (real data lives in {DATA})")
        return 0
    rows = sum(sum(1 for _ in p.open()) - 1 for p in paths)
    bad: list[int] = []
    times: dict[str, list[float]] = {"csv": [], "replay": [], "replay --ratings": []}
    for _ in range(rounds):  # interleaved: the limit and the project see the same load
        times["csv"].append(cpu(lambda: [bare_csv(p) for p in paths]))
        times["replay"].append(cpu(lambda: bad.append(replay_encoded(paths, False))))
        times["replay --ratings"].append(
            cpu(lambda: bad.append(replay_encoded(paths, True))))
    errors = sum(bad)
    with open("/proc/loadavg") as fh:
        load = " ".join(fh.read().split()[:3])
    print(f"files: {', '.join(p.name for p in paths)} ({rows} ticks); {rounds} rounds, "
          f"{os.cpu_count()} cores, load average {load}")
    base = statistics.median(times["csv"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:18s} CPU s min {min(ts):7.3f}  median {med:7.3f}  max {max(ts):7.3f}  "
              f"{rows / med:10,.0f} ticks/s  ratio {med / base:6.2f}x")
    print(f"BENCH-RESULT replay_ratio={statistics.median(times['replay']) / base:.2f} "
          f"replay_ratings_ratio={statistics.median(times['replay --ratings']) / base:.2f} "
          f"target<=5 errors={errors}")
    print(f"engine state per token:    {memory_per_token() / 1024:8.2f} KB  (target < 20 KB)")
    if errors:
        print(f"ERROR: {errors} bad rows", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
