"""``benchmarks/table_history.py``: each row of the performance table across every table
``report.py`` printed into the docs. Checked against tables made by ``report.py`` itself
from results whose ratios and verdicts the test chose, and against the real
docs/performance.md counted line by line."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

SCRIPT = REPO / "benchmarks" / "table_history.py"
MACHINE = {"cores": 2, "memory_gb": 23.5, "load": [0.5, 0.5, 0.5], "python": "3.11.7"}
SPREAD = {"min": 1.0, "median": 2.0, "max": 3.0}


def result(row: str, ratio: float, target: str, met: bool, note: str = "") -> str:
    return "BENCH-RESULT " + json.dumps({
        "row": row, "unit": "ticks/s", "limit_name": "bare", "limit": SPREAD,
        "project": SPREAD, "ratio": ratio, "target": target, "met": met, "note": note,
        "machine": MACHINE})


def report_table(tmp_path: Path, name: str, *lines: str) -> str:
    saved = tmp_path / f"{name}.txt"
    saved.write_text("\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "report.py"), str(saved)],
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def summary(*args: str) -> dict[str, list[str]]:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, timeout=60, check=True)
    lines = done.stdout.split("| row | tables | met |", 1)[1].splitlines()[2:]
    rows = [line for line in lines if line.startswith("| ")]
    return {r.split(" | ")[0][2:]: [c.strip() for c in r.split("|")[2:5]] for r in rows}


# Three runs of three rows: (ratio, met) per run; the monitor row's text carries a
# number that changed between runs, and every row a note with figures of its run.
LIVE = "live monitor, 1,000 tokens, 1 tick per token per second, {} synthetic ticks"
RUNS = {
    "live": [(0.69, False), (0.74, True), (0.71, True)],
    "mypyc": [(2.52, True), (3.21, True), (2.9, True)],
    "peer": [(0.15, False), (0.12, False), (0.19, False)],
}


def test_each_row_is_counted_across_tables_made_by_report_py(tmp_path: Path) -> None:
    doc = ["# Performance", ""]
    for i in range(3):
        doc += [f"## Run {i}", "", "### Its table", "", report_table(
            tmp_path, f"run{i}",
            result(LIVE.format(f"{100_000 * (i + 1):,}"), RUNS["live"][i][0], ">= 0.7",
                   RUNS["live"][i][1], note=f"CPU per tick bare/monitor 0.{60 + i} (x (y 1))"),
            result("replay, 3 real files, whole process (CPU) (mypyc build)",
                   RUNS["mypyc"][i][0], "<= 5x (then 3x)", RUNS["mypyc"][i][1],
                   note=f"{400_000 + i:,} ticks per CPU-second"),
            result("peer: Quix Streams, one tumbling mean", RUNS["peer"][i][0],
                   "peer (no target)", False)), "Text between the tables.", ""]
    path = tmp_path / "perf.md"
    path.write_text("\n".join(doc))
    got = summary(str(path))

    def truth(name: str, judged: bool) -> list[str]:
        ratios = [r for r, _ in RUNS[name]]
        met = f"{sum(m for _, m in RUNS[name])} of 3" if judged else "— (no target)"
        figures = [min(ratios), statistics.median(ratios), max(ratios)]
        return ["3", met, " / ".join(f"{v:.2f}" for v in figures)]

    assert got == {
        LIVE.format("100,000"): truth("live", True),
        "replay, 3 real files, whole process (CPU) (mypyc build)": truth("mypyc", True),
        "peer: Quix Streams, one tumbling mean": truth("peer", False),
    }


def test_every_table_and_row_of_the_docs_is_read() -> None:
    """Counted without the script: the header lines, and the body lines under them."""
    lines = (REPO / "docs" / "performance.md").read_text().splitlines()
    headers = [i for i, line in enumerate(lines) if line.startswith("| path | project:")]
    body = 0
    for start in headers:
        end = start + 2  # the header and its |---| line
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        body += end - start - 2
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.startswith(f"{len(headers)} tables:\n")
    rows = summary()
    assert sum(int(tables) for tables, _, _ in rows.values()) == body
    assert len(headers) >= 2


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "none.md")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "cannot read" in done.stderr and "none.md" in done.stderr


def test_a_row_that_is_not_report_pys_is_an_error_not_a_guess(tmp_path: Path) -> None:
    table = report_table(tmp_path, "one", result("row", 0.5, ">= 0.7", False))
    path = tmp_path / "perf.md"
    path.write_text(table.replace("**no**", "maybe"))
    done = subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "not a row of report.py's table" in done.stderr and "'maybe'" in done.stderr
