"""``benchmarks/report.py``: the README's table from saved ``BENCH-RESULT`` lines. A ratio
is printed so that the cell and the "met" column never contradict each other."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

MACHINE = {"cores": 2, "memory_gb": 23.5, "load": [0.5, 0.5, 0.5], "python": "3.11.7"}


def row(name: str, ratio: float, target: str, met: bool) -> str:
    spread = {"min": 1.0, "median": 2.0, "max": 3.0}
    return "BENCH-RESULT " + json.dumps({
        "row": name, "unit": "ticks/s", "limit_name": "bare", "limit": spread,
        "project": spread, "ratio": ratio, "target": target, "met": met, "note": "",
        "machine": MACHINE})


def report(tmp_path: Path, *lines: str) -> str:
    """What report.py prints for a saved output holding ``lines``."""
    saved = tmp_path / "out.txt"
    saved.write_text("noise before\n" + "\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "report.py"), str(saved)],
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def cells(tmp_path: Path, *lines: str) -> dict[str, list[str]]:
    rows = [line for line in report(tmp_path, *lines).splitlines() if line.startswith("| ")][1:]
    return {r.split(" | ")[0][2:]: [c.strip() for c in r.split("|")[5:8]] for r in rows}


def test_a_ratio_just_short_of_its_bound_is_not_printed_as_the_bound(tmp_path: Path) -> None:
    got = cells(tmp_path, row("short", 0.6985, ">= 0.7", False),
                row("over", 0.7021, ">= 0.7", True), row("plain", 0.8123, ">= 0.7", True),
                row("times", 4.996, "<= 5x (then 3x)", True))
    assert got == {"short": ["0.699", ">= 0.7", "**no**"],
                   "over": ["0.702", ">= 0.7", "yes"],
                   "plain": ["0.81", ">= 0.7", "yes"],
                   "times": ["4.996", "<= 5x (then 3x)", "yes"]}


def test_a_figure_under_a_hundredth_keeps_two_significant_digits(tmp_path: Path) -> None:
    """0.0048 bytes written per byte in is not "0.00" (which reads as none at all)."""
    spread = {"min": 0.00481, "median": 0.00487, "max": 0.0049}
    line = "BENCH-RESULT " + json.dumps({
        "row": "bytes", "unit": "B/B", "limit_name": "", "limit": None, "project": spread,
        "ratio": 0.00487, "target": "<= 1", "met": True, "note": "", "machine": MACHINE})
    row = next(r for r in report(tmp_path, line).splitlines() if r.startswith("| bytes"))
    assert [c.strip() for c in row.split("|")[2:8]] == [
        "0.0049 B/B (0.0048–0.0049)", "", "—", "0.0049", "<= 1", "yes"]


def test_the_table_names_the_processor_when_the_output_recorded_it(tmp_path: Path) -> None:
    """Two machines with the same cores and memory gave ratios on either side of some
    targets: the heading says which processor; output saved before it was recorded still
    makes a table."""
    named = row("r", 0.81, ">= 0.7", True).replace(
        '"cores": 2,', '"cores": 2, "cpu": "AMD EPYC",')
    assert report(tmp_path, named).splitlines()[0].startswith(
        "Measured on 2 cores (AMD EPYC), 23.5 GB, Python 3.11.7;")
    assert report(tmp_path, row("r", 0.81, ">= 0.7", True)).splitlines()[0].startswith(
        "Measured on 2 cores, 23.5 GB, Python 3.11.7;")


def test_the_scripts_machine_line_names_the_processor_they_record() -> None:
    """The ``machine:`` line every script prints names the processor its results record,
    which is ``/proc/cpuinfo``'s first model name where there is one."""
    probe = ("import sys; sys.path.insert(0, 'benchmarks'); import common;"
             "print(common.machine()['cpu']); print(common.machine_line())")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=True)
    cpu, line = done.stdout.splitlines()
    cpuinfo = Path("/proc/cpuinfo")
    names = [x.split(":", 1)[1].strip() for x in cpuinfo.read_text().splitlines()
             if x.startswith("model name")] if cpuinfo.exists() else []
    if names:
        assert cpu == names[0]
    assert line.startswith("machine: ")
    assert (f" cores ({cpu})," in line) == bool(cpu), line
