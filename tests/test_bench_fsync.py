"""The disk-flush probe: slow flushes joined into episodes as its help says, and a real run
that prints its figures and leaves no file behind."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from bench_fsync import episodes

from tests.conftest import REPO


def _brute_force(slow: list[tuple[float, float]], gap: float
                 ) -> list[tuple[float, float, int, float]]:
    """Episodes by cutting the sorted flushes wherever two neighbours are ``gap`` or more
    apart, each piece then summed up on its own."""
    pieces: list[list[tuple[float, float]]] = []
    for i, flush in enumerate(slow):
        if i == 0 or flush[0] - slow[i - 1][0] >= gap:
            pieces.append([])
        pieces[-1].append(flush)
    return [(p[0][0], p[-1][0], len(p), max(ms for _, ms in p)) for p in pieces]


def test_episodes_join_slow_flushes_closer_than_the_gap() -> None:
    rng = random.Random(7)
    for _ in range(200):
        at = 0.0
        slow = []
        for _ in range(rng.randrange(0, 30)):
            at += rng.choice([0.01, 0.1, 0.49, 0.5, 0.51, 3.0])
            slow.append((round(at, 2), rng.uniform(5, 120)))
        assert episodes(slow, 0.5) == _brute_force(slow, 0.5)


def test_a_short_run_prints_its_figures_and_removes_its_file(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_fsync.py"), "--dir", str(tmp_path),
         "--seconds", "0.5", "--rate", "40"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    flushes = next(line for line in done.stdout.splitlines() if " flushes: median " in line)
    # Paced at 40 a second for half a second: 20 flushes, or fewer on a slow disk.
    assert 1 <= int(flushes.split()[0].replace(",", "")) <= 21
    assert list(tmp_path.iterdir()) == []
