"""The README's performance table, generated from the benchmarks' ``BENCH-RESULT`` lines.

    python benchmarks/report.py OUTPUT.txt [OUTPUT.txt ...]   # saved benchmark output
    python benchmarks/report.py --run                         # run the table's scripts

Prints a Markdown table: one row per result, the project's median (min–max) next to its
limit's, the ratio, the target, and whether it is met; above it the machine (cores,
processor, memory, load average) the figures were taken on. Paste it into README.md as is.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from common import RESULT_PREFIX

HERE = Path(__file__).resolve().parent
#: The table's header row (``table_history.py`` finds the tables kept in the docs by it).
HEADER = ("| path | project: median (min–max) | limit it is measured against "
          "| limit: median (min–max) | ratio | target | met |")
#: The ``met`` column: met, not met, no target (a peer's row).
MET_CELLS: dict[bool | None, str] = {True: "yes", False: "**no**", None: "—"}
#: Delivery: five throughput rounds; isolation from five 24 s runs a side (a p99 of
#: ~1,200 latencies; 8 s runs, ~400, moved between 0.98 and 1.23 with the same code; the
#: median of three p99s still let one slow run decide: PostgreSQL's spread 17-131 ms),
#: next to a hanging, a failing (503 at once), a slow (1 s), a flapping (503 and 200
#: in turn), a flaky (503 to a third of requests, at random) and a slow flaky (answers
#: after two event intervals, 503 to a fifth) receiver, a row each.
_DELIVERY = ["--rounds", "5", "--seconds", "24", "--isolation-rounds", "5",
             "--neighbours", "hang,fail,slow,flap,flaky,slowflaky"]
#: The scripts behind the table's rows (others in benchmarks/ are not in the table).
SCRIPTS = [
    ["bench_replay.py", "--table"],
    ["bench_monitor.py", "--table", "--ticks", "100000", "--ticks-per-second-row", "300000",
     "--tokens", "1000"],
    ["bench_monitor.py", "--table", "--ticks", "100000", "--ticks-per-second-row", "300000",
     "--tokens", "1000", "--compiled"],
    ["bench_delivery.py", *_DELIVERY],
    ["bench_delivery.py", *_DELIVERY, "--storage-url",
     "postgresql://postgres@127.0.0.1:5432/postgres"],
    ["bench_api.py", "--db", "both", "--days", "1", "--seconds", "5"],
    ["bench_cli.py"],
]


def results(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[len(RESULT_PREFIX):]) for line in text.splitlines()
            if line.startswith(RESULT_PREFIX)]


def _figure(spread: dict[str, float] | None, unit: str) -> str:
    if not spread:
        return "—"
    # Enough digits to tell figures apart: 0.03 B/B must not print as 0.0, nor 0.0048 as 0.00.
    median = spread["median"]
    digits = 0 if median >= 100 else 1 if median >= 1 else _small_digits(median)
    return (f"{spread['median']:,.{digits}f} {unit} "
            f"({spread['min']:,.{digits}f}–{spread['max']:,.{digits}f})")


def _met(row: dict[str, Any]) -> str:
    """A peer's row (another tool on the same limit) has no target to meet."""
    if row["target"].startswith("peer"):
        return MET_CELLS[None]
    return MET_CELLS[bool(row["met"])]


def _small_digits(value: float) -> int:
    """Decimals for a figure under 1: two, or as many as show its first two significant
    digits (0.0048 as "0.0048", not "0.00", which reads as nothing at all)."""
    if not 0 < abs(value) < 0.01:
        return 2
    return 1 - math.floor(math.log10(abs(value)))


def _ratio(row: dict[str, Any]) -> str:
    """Two decimals, or three where two would print the target's own bound (0.698
    against ">= 0.7" is not met, and "0.70" would say it is), or more for a ratio under
    0.01 (:func:`_small_digits`)."""
    ratio = row["ratio"]
    if ratio is None:
        return "—"
    bound = re.search(r"\d+(?:\.\d+)?", row["target"])
    if bound and f"{ratio:.2f}" == f"{float(bound.group()):.2f}":
        return f"{ratio:.3f}"
    return f"{ratio:.{_small_digits(ratio)}f}"


def _load_words(worst: float) -> str:
    """Why the absolute figures should or should not be trusted: on 2 cores a load
    average above ~2.5 means other work shared the machine during the runs."""
    if worst > 2.5:
        return ("a shared, loaded machine: absolute figures are low, the ratios to each "
                "limit are the comparable part")
    return "a lightly loaded machine; ratios to each limit are taken within one run"


def table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no BENCH-RESULT lines found\n"
    m = rows[0]["machine"]
    loads = sorted({tuple(r["machine"]["load"]) for r in rows})
    # Saved output from before the processor was recorded has no "cpu".
    cpu = f" ({m['cpu']})" if m.get("cpu") else ""
    out = [f"Measured on {m['cores']} cores{cpu}, {m['memory_gb']} GB, Python {m['python']}; "
           f"1-minute load average during the runs {min(x[0] for x in loads):.1f}–"
           f"{max(x[0] for x in loads):.1f} ({_load_words(max(x[0] for x in loads))}).", "",
           HEADER,
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = _ratio(r)
        note = f" ({r['note']})" if r.get("note") else ""
        out.append(f"| {r['row']}{note} | {_figure(r['project'], r['unit'])} "
                   f"| {r['limit_name']} | {_figure(r['limit'], r['unit'])} | {ratio} "
                   f"| {r['target']} | {_met(r)} |")
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outputs", nargs="*", type=Path, help="saved benchmark output")
    parser.add_argument("--run", action="store_true", help="run the scripts now")
    args = parser.parse_args()
    text = "".join(p.read_text() for p in args.outputs)
    if args.run:
        for script in SCRIPTS:
            done = subprocess.run([sys.executable, str(HERE / script[0]), *script[1:]],
                                  capture_output=True, text=True, check=False)
            sys.stderr.write(done.stdout[-2000:])
            if done.returncode:
                sys.stderr.write(done.stderr[-2000:])
                print(f"{script[0]} failed (exit {done.returncode})", file=sys.stderr)
                return 1
            text += done.stdout
    print(table(results(text)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
