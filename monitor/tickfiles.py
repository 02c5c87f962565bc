"""Reading tick files: canonical CSV and JSON lines, with bad rows reported, never dropped.

Both formats are read as a stream of :class:`Row` results so a caller can count, report
and carry on: a bad row is a value, not an exception.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from itertools import chain
from operator import itemgetter
from pathlib import Path

from .csvplain import PLAIN_HEADERS, plain_blocks
from .jsonlplain import jsonl_batches
from .tickrows import BadRow, Row, checked_row, known_names, plain_number, plain_tick
from .ticks import Tick

__all__ = ["BLOCK", "LINES_BATCH", "BadRow", "Row", "merge_by_time", "read_csv",
           "read_csv_batches", "read_file", "read_file_batches", "read_jsonl",
           "read_jsonl_batches"]


def _is_jsonl(path: Path) -> bool:
    return path.suffix.lower() in {".jsonl", ".ndjson", ".json"}


#: Characters a canonical file is read in (below csv's default field limit, 131,072).
BLOCK = 1 << 16
#: Rows per list of :func:`read_jsonl_batches`, and of a CSV file read line by line.
LINES_BATCH = 1024


def read_csv(path: Path, block: int = BLOCK) -> Iterator[Row]:
    """The rows of a tick CSV file; ``block`` is the size of the reads of a canonical
    file's plain path (tests make it small to cross its edges)."""
    return chain.from_iterable(read_csv_batches(path, block))


def read_csv_batches(path: Path, block: int = BLOCK) -> Iterator[list[Row]]:
    """:func:`read_csv`'s rows in lists (no generator step per row): a block's rows on a
    canonical file's plain path, else up to :data:`LINES_BATCH` rows; an error (csv's,
    the decoder's) is raised after the rows before it, as read row by row."""
    with path.open(newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh), None)
        if header is None:
            return
        col = {name.strip().lower(): i for i, name in enumerate(header)}
        missing = [c for c in ("ts", "chain", "token") if c not in col]
        if missing:
            yield [BadRow(str(path), 1, "bad_header", f"missing columns {missing}")]
            return
        width = len(header)
        # A canonical header (the shared files', the producers') is read on the plain
        # path (monitor/csvplain.py); any other order or set of columns line by line,
        # its cells picked by index.
        canonical = tuple(name.strip().lower() for name in header) in PLAIN_HEADERS
        # Absent optional columns read the empty cell appended to every row (index width).
        fields = itemgetter(col["ts"], col["chain"], col["token"], *(
            col.get(name, width)
            for name in ("symbol", "price_usd", "peg_usd", "slippage_bps", "oracle_price_usd",
                         "source")
        ))
        names: dict[tuple[str, str, str], tuple[str, str, str] | None] = {}
        limit = csv.field_size_limit()
        line = 1
        lines: Iterator[str] = fh
        if canonical:
            line, lines = yield from plain_blocks(path, fh, block, limit, width, fields,
                                                  names)
        # The previous row's name cells and what they named: a file is mostly one token,
        # so comparing three short strings spares a tuple and its hash per row.
        last_chain = last_token = last_symbol = ""
        known: tuple[str, str, str] | None = None
        # Likewise the previous row's peg cell and what it read as: a file's peg is one
        # value nearly throughout, and parsing it was ~10 % of reading a plain row.
        last_peg = ""
        peg = plain_number("")
        rows: list[Row] = []
        add = rows.append
        try:
            for text in lines:
                line += 1
                # csv.reader's record, cut without it where it cannot differ: a line with no
                # quote (a quoted cell may span lines) and no cell over the field limit (an
                # error) is its cells split at commas, without the line end (only ever at
                # the end of a line read with newline=""). Anything else: csv.reader itself.
                if '"' in text or len(text) > limit:
                    row = next(csv.reader(chain((text,), lines)), [])
                else:
                    text = text.rstrip("\r\n")
                    row = text.split(",") if text else []
                if len(row) != width:
                    if not row:
                        continue
                    # Short rows read empty cells; cells past the header are ignored.
                    row = (row + [""] * (width - len(row)))[:width]
                row.append("")
                (ts_text, chain_s, token, symbol, price_s, peg_s, slip_s, oracle_s,
                 source) = fields(row)
                if chain_s != last_chain or token != last_token or symbol != last_symbol:
                    last_chain, last_token, last_symbol = chain_s, token, symbol
                    known = known_names(chain_s, token, symbol, names)
                if peg_s != last_peg:
                    last_peg = peg_s
                    peg = plain_number(peg_s)
                tick = plain_tick(known, ts_text, price_s, peg, slip_s, oracle_s, source) \
                    if known is not None and peg is not None else None
                add(tick if tick is not None else checked_row(
                    path, line, ts_text, chain_s, token, symbol, price_s, peg_s, slip_s,
                    oracle_s, source))
                if len(rows) >= LINES_BATCH:
                    yield rows
                    rows = []
                    add = rows.append
        except Exception:
            # What csv.reader or the decoder raises comes after the rows before it.
            if rows:
                yield rows
            raise
        if rows:
            yield rows


def read_jsonl(path: Path) -> Iterator[Row]:
    return chain.from_iterable(read_jsonl_batches(path))


def read_jsonl_batches(path: Path) -> Iterator[list[Row]]:
    """:func:`read_jsonl`'s rows in lists of up to :data:`LINES_BATCH` (a line made into
    its tick on the plain path where it can be, ``monitor/jsonlplain.py``)."""
    return jsonl_batches(path, LINES_BATCH)


def read_file(path: Path) -> Iterator[Row]:
    return read_jsonl(path) if _is_jsonl(path) else read_csv(path)


def read_file_batches(path: Path) -> Iterator[list[Row]]:
    """:func:`read_file`'s rows in lists (no generator step per row)."""
    return read_jsonl_batches(path) if _is_jsonl(path) else read_csv_batches(path)


def merge_by_time(streams: Iterable[Iterator[Row]]) -> Iterator[Row]:
    """Merge files that are each in time order into one time-ordered stream.

    Bad rows pass through where they stand (they have no trustworthy time). Files that are
    not sorted still work: the engine's lateness allowance and counters deal with them.

    Each step yields the waiting row whose stream's newest tick time is the smallest, the
    first stream on a tie: the order ``heapq.merge`` gives rows keyed ``(newest tick time,
    stream index, row number)``, without a key tuple and a generator frame per row. The
    other streams do not move while one yields, so it yields on without a scan while its
    time stays below the smallest of theirs (or equal to it, ahead of that stream): a
    one-minute file yields runs of rows between another file's sparse ticks.
    """
    sources: list[Iterator[Row]] = []
    heads: list[Row] = []
    times: list[float] = []  # per stream, the newest tick time so far (0.0 before one)
    for stream in streams:
        for row in stream:  # the first row, if any
            sources.append(stream)
            heads.append(row)
            times.append(row.ts if isinstance(row, Tick) else 0.0)
            break
    while len(heads) > 1:
        best = 0
        for i in range(1, len(heads)):
            if times[i] < times[best]:
                best = i
        rival = 1 if best == 0 else 0  # the first of the others with the smallest time
        for i in range(rival + 1, len(heads)):
            if i != best and times[i] < times[rival]:
                rival = i
        limit = times[rival]
        yield heads[best]
        # A ``for`` over the stream, left with ``break`` (the stream keeps its place): no
        # ``next`` call per row.
        for following in sources[best]:
            if isinstance(following, Tick):
                ts = following.ts
                # The scan above reads ``times`` only once this loop has stopped.
                if ts > limit or (ts == limit and rival < best):
                    heads[best] = following
                    times[best] = ts
                    break
            yield following
        else:  # the stream is done
            del sources[best], heads[best], times[best]
    if heads:
        yield heads[0]
        yield from sources[0]
