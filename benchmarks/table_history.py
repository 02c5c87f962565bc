"""Each row of the performance table across every full table kept in the docs.

    python benchmarks/table_history.py                     # docs/performance.md
    python benchmarks/table_history.py --matrix            # plus each table's ratio per row
    python benchmarks/table_history.py FILE.md [FILE.md ...]

One table is one run of the table's scripts on one machine, so a single table cannot
tell a row that sits at its target from one that misses it by a margin, or a row that
follows the machine from one that follows the code. This reads every table
``report.py`` printed into the given Markdown files (the ``| path | … | met |`` tables,
each named by the headings above it) and prints, per row: how many tables hold it, in
how many it met its target, and its ratio's min, median and max. The tables span many
passes, so the code as well as the machine changed between them; each table's heading
names its commit. A row is one row across tables when its text matches once its figures
are set aside: the notes in brackets at its end that carry numbers, the numbers in its
text, and which command the CLI row found slowest.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from report import HEADER, MET_CELLS

REPO = Path(__file__).resolve().parent.parent
#: A ``met`` cell -> met, not met, no target (a peer's row).
MET = {cell: met for met, cell in MET_CELLS.items()}


@dataclass
class Table:
    title: str
    rows: dict[str, tuple[str, float | None, bool | None]] = field(default_factory=dict)
    """Row key -> (the row's text without its figures, ratio, met)."""


@dataclass
class Row:
    text: str
    ratios: list[float] = field(default_factory=list)
    met: int = 0
    judged: int = 0
    tables: int = 0


def _trailing_group(text: str) -> int | None:
    """Where the bracketed group that ends ``text`` opens (brackets nest), else None."""
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return None


def row_text(cell: str) -> str:
    """A row's first cell without the figures of its run: the bracketed notes at its end
    that hold a number (``(237,341 ticks per CPU-second)``; ``(mypyc build)`` and
    ``(SQLite)`` stay) and which command the CLI row found slowest."""
    text = re.sub(r", slowest: [^)]*", "", cell.strip())
    while (start := _trailing_group(text)) is not None and re.search(r"\d", text[start:]):
        text = text[:start].rstrip()
    return text


def row_key(text: str) -> str:
    """Rows whose texts differ only in their numbers (ticks timed, warm-up) are one row."""
    return re.sub(r"\d[\d,.]*", "#", text)


def _ratio(cell: str) -> float | None:
    try:
        return float(cell.replace(",", ""))
    except ValueError:
        return None


def tables_in(markdown: str, source: str = "") -> list[Table]:
    """Every ``report.py`` table of ``markdown``, titled by the headings it sits under."""
    found: list[Table] = []
    headings: dict[int, str] = {}
    current: Table | None = None
    width = 0  # cells in a row of the current table
    for line in markdown.splitlines():
        heading = re.match(r"(#{1,6}) (.*)", line)
        if heading:
            level = len(heading.group(1))
            headings = {k: v for k, v in headings.items() if k < level}
            headings[level] = heading.group(2).strip()
        if line.startswith(HEADER):
            width = line.strip().strip("|").count("|") + 1
            title = " / ".join(headings[k] for k in sorted(headings) if k > 1)
            current = Table(f"{source}{': ' if source and title else ''}{title}")
            found.append(current)
            continue
        if current is None:
            continue
        if not line.startswith("|"):
            current = None
            continue
        if line.startswith("|---"):
            continue
        # The path cell can hold no "|"; the last columns are ratio, target and met.
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != width or cells[-1] not in MET:
            raise ValueError(f"{current.title}: not a row of report.py's table "
                             f"({len(cells)} cells under {width} columns, met "
                             f"{cells[-1]!r}): {line[:120]}")
        text = row_text(cells[0])
        key = row_key(text)
        if key in current.rows:
            raise ValueError(f"{current.title}: two rows read as one: {text[:120]}")
        current.rows[key] = (text, _ratio(cells[-3]), MET[cells[-1]])
    return found


def history(tables: list[Table]) -> dict[str, Row]:
    """Per row key, in the order rows first appear: its text in the first table that holds
    it, its ratios, and in how many of the tables that judge it (not a peer's) it met."""
    rows: dict[str, Row] = {}
    for table in tables:
        for key, (text, ratio, met) in table.rows.items():
            row = rows.setdefault(key, Row(text))
            row.tables += 1
            if ratio is not None:
                row.ratios.append(ratio)
            if met is not None:
                row.judged += 1
                row.met += met
    return rows


def _figure(value: float) -> str:
    """Two decimals, a third where it is there (0.698 against ">= 0.7", or a median of
    two), two significant digits under 0.1 (0.0049, not "0.00")."""
    if abs(value) < 0.1:
        return f"{value:.2g}"
    text = f"{value:.3f}"
    return text[:-1] if text.endswith("0") else text


def _spread(values: list[float]) -> str:
    if not values:
        return "—"
    return " / ".join(_figure(v) for v in (min(values), statistics.median(values), max(values)))


def render(tables: list[Table], *, matrix: bool) -> str:
    rows = history(tables)
    out = [f"{len(tables)} tables:"]
    out += [f"  T{i + 1}: {t.title}" for i, t in enumerate(tables)]
    out += ["", "| row | tables | met | ratio min / median / max |", "|---|---|---|---|"]
    for row in rows.values():
        met = f"{row.met} of {row.judged}" if row.judged else "— (no target)"
        out.append(f"| {row.text} | {row.tables} | {met} | {_spread(row.ratios)} |")
    if matrix:
        out += ["", "| row | " + " | ".join(f"T{i + 1}" for i in range(len(tables))) + " |",
                "|---|" + "---|" * len(tables)]
        for key, row in rows.items():
            cells = []
            for t in tables:
                got = t.rows.get(key)
                if got is None or got[1] is None:
                    cells.append("")
                else:
                    cells.append(_figure(got[1]) + ("" if got[2] is not False else " ✗"))
            out.append(f"| {row.text} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path,
                        default=[REPO / "docs" / "performance.md"],
                        help="Markdown files holding report.py's tables "
                             "(default: docs/performance.md)")
    parser.add_argument("--matrix", action="store_true",
                        help="also a column per table with the row's ratio (✗: not met)")
    args = parser.parse_args()
    tables: list[Table] = []
    for path in args.files:
        try:
            text = path.read_text()
        except OSError as exc:
            print(f"table_history: cannot read {path}: {exc.strerror}", file=sys.stderr)
            return 2
        try:
            tables += tables_in(text, path.name if len(args.files) > 1 else "")
        except ValueError as exc:
            print(f"table_history: {path}: {exc}", file=sys.stderr)
            return 1
    if not tables:
        print("table_history: no report.py table found", file=sys.stderr)
        return 1
    print(render(tables, matrix=args.matrix), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
