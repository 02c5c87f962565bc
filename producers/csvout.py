"""Writing ticks as the canonical CSV, so generated or adapted ticks can be replayed."""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from monitor.ticks import CSV_HEADER_WITH_ORACLE, Tick
from monitor.timefmt import format_ts


def tick_row(tick: Tick) -> list[str]:
    """One canonical row; empty cells mean "not observed" (DESIGN.md)."""
    return [
        format_ts(tick.ts), tick.chain, tick.token, tick.symbol,
        tick.price_text or "", tick.peg_text or "",
        "" if tick.slippage_bps is None else repr(tick.slippage_bps),
        tick.oracle_text or "",
    ]


def write_ticks(ticks: Iterable[Tick], out: TextIO) -> int:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER_WITH_ORACLE)
    count = 0
    for tick in ticks:
        writer.writerow(tick_row(tick))
        count += 1
    return count


def write_ticks_file(ticks: Iterable[Tick], path: Path | str) -> int:
    """Write to ``path`` (``-`` is stdout); returns the number of ticks written."""
    if str(path) == "-":
        return write_ticks(ticks, sys.stdout)
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        return write_ticks(ticks, fh)
