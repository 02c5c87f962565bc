"""Reading tick files: canonical CSV and JSON lines, with bad rows reported, never dropped.

Both formats are read as a stream of :class:`Row` results so a caller can count, report
and carry on: a bad row is a value, not an exception.
"""

from __future__ import annotations

import csv
import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .ticks import BadTick, Tick, decode_tick, make_tick


@dataclass(frozen=True, slots=True)
class BadRow:
    path: str
    line: int
    reason: str
    detail: str


Row = Tick | BadRow


def _is_jsonl(path: Path) -> bool:
    return path.suffix.lower() in {".jsonl", ".ndjson", ".json"}


def read_csv(path: Path) -> Iterator[Row]:
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header is None:
            return
        col = {name.strip().lower(): i for i, name in enumerate(header)}
        missing = [c for c in ("ts", "chain", "token") if c not in col]
        if missing:
            yield BadRow(str(path), 1, "bad_header", f"missing columns {missing}")
            return
        i_ts, i_chain, i_token = col["ts"], col["chain"], col["token"]
        optional = [
            col.get(name)
            for name in ("symbol", "price_usd", "peg_usd", "slippage_bps", "oracle_price_usd",
                         "source")
        ]
        width = len(header)
        for line, row in enumerate(reader, start=2):
            if len(row) < width:
                if not row:
                    continue
                row = row + [""] * (width - len(row))
            sym, price, peg, slip, oracle, source = (
                row[i] if i is not None else "" for i in optional
            )
            try:
                yield make_tick(row[i_ts], row[i_chain], row[i_token], sym, price, peg, slip,
                                oracle, source)
            except BadTick as exc:
                yield BadRow(str(path), line, exc.reason, exc.detail)


def read_jsonl(path: Path) -> Iterator[Row]:
    with path.open("rb") as fh:
        for line, raw in enumerate(fh, start=1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                yield decode_tick(raw)
            except BadTick as exc:
                yield BadRow(str(path), line, exc.reason, exc.detail)


def read_file(path: Path) -> Iterator[Row]:
    return read_jsonl(path) if _is_jsonl(path) else read_csv(path)


def merge_by_time(streams: Iterable[Iterator[Row]]) -> Iterator[Row]:
    """Merge files that are each in time order into one time-ordered stream.

    Bad rows pass through where they stand (they have no trustworthy time). Files that are
    not sorted still work: the engine's lateness allowance and counters deal with them.
    """

    def keyed(index: int, rows: Iterator[Row]) -> Iterator[tuple[float, int, int, Row]]:
        last = 0.0
        for seq, row in enumerate(rows):
            if isinstance(row, Tick):
                last = row.ts
            yield (last, index, seq, row)

    for _, _, _, row in heapq.merge(*(keyed(i, s) for i, s in enumerate(streams))):
        yield row
