"""Reading tick files: canonical CSV and JSON lines, with bad rows reported, never dropped.

Both formats are read as a stream of :class:`Row` results so a caller can count, report
and carry on: a bad row is a value, not an exception.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import TextIO

from .tickrows import known_names, plain_number, plain_tick
from .ticks import CSV_HEADER, BadTick, Tick, decode_tick, make_tick
from .timefmt import iso_caches


@dataclass(frozen=True, slots=True)
class BadRow:
    path: str
    line: int
    reason: str
    detail: str


Row = Tick | BadRow


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
        # The canonical header (the shape of every shared file) unpacks a row in place;
        # any other order or set of columns picks its cells by index.
        canonical = tuple(name.strip().lower() for name in header) == CSV_HEADER
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
            line, lines = yield from _plain_blocks(path, fh, block, limit, fields, names)
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
                add(tick if tick is not None else _checked(path, line, ts_text, chain_s, token,
                                                           symbol, price_s, peg_s, slip_s,
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


def _plain_blocks(path: Path, fh: TextIO, block: int, limit: int,
                  fields: Callable[[list[str]], tuple[str, ...]],
                  names: dict[tuple[str, str, str], tuple[str, str, str] | None],
                  ) -> Generator[list[Row], None, tuple[int, Iterator[str]]]:
    """A canonical file's plain path: the file read in blocks of ``block`` characters and
    cut into lines by ``str.split`` (no readline per line), a row whose cells around its
    price are the last plain row's made into its tick here (its time from fast_iso's
    caches); one list of rows per block. A block with a quote, a lone "\r" (csv.reader's
    business) or more than csv's field limit of characters (a cell could be over it: an
    error) ends it; returns the last line number read and the rest of the file's lines,
    from the start of the first unfinished one, for :func:`read_csv_batches`' own loop."""
    days, clocks = iso_caches()
    # Slices made once: ``text[:11]`` builds a slice object each time in 3.11.
    day, clock = slice(11), slice(11, 20)
    inf = math.inf
    line = 1
    # The cells of the last plain row between its time and its price, and after its
    # price, with what they read as; "\n" (in no line) before the first.
    middle = tail = "\n"
    mid = after = slice(0)
    chain_n = address = symbol_n = ""
    peg_v: float | None = None
    peg_t: str | None = None
    # Likewise its price cell (a one-minute file repeats a price often).
    last_price = "\n"
    price = 0.0
    price_t = ""
    carry = ""
    size = max(1, min(block, limit))
    while True:
        text = fh.read(size)
        if not text:
            return line, iter((carry,) if carry else ())
        text = carry + text
        if text[-1] == "\r":  # its "\n", if any, with it
            text += fh.read(1)
        if '"' in text or len(text) > limit:
            # Finish the line the block stopped in: the loop of read_csv_batches starts
            # at a line's start.
            return line, chain(io.StringIO(text + fh.readline(), newline=""), fh)
        # Lines end at "\n", perhaps after a "\r"; a "\r" alone ends a line too. Only
        # ``in`` tests (memchr) and a join, no counting (one pass a character).
        if "\r" in text:
            pieces = text.split("\r\n")
            rest = "".join(pieces)
            if "\r" in rest:  # a lone "\r"
                return line, chain(io.StringIO(text + fh.readline(), newline=""), fh)
            if "\n" in rest:  # "\r\n" and "\n" both: a cell may end with the "\r"
                pieces = text.split("\n")
        else:
            pieces = text.split("\n")
        carry = pieces.pop()
        rows: list[Row] = []
        add = rows.append
        for text in pieces:
            line += 1
            # (A slice and ``==``, not ``startswith(middle, 20)``: a method with
            # arguments parsed from a tuple costs more than a copy of ~50 characters.)
            plain = text[mid] == middle
            if not plain:
                # Not the cells of the last plain row: split the line, check its cells,
                # and if they are plain, they are the ones looked for from now on.
                try:  # a row of another width raises, and is read below
                    ts_text, chain_s, token, symbol, _, peg_s, slip_s = text.split(",")
                except ValueError:
                    pass
                else:
                    known = known_names(chain_s, token, symbol, names)
                    peg = plain_number(peg_s)
                    if known is not None and peg is not None and not slip_s and \
                            len(ts_text) == 20:
                        chain_n, address, symbol_n = known
                        peg_t, peg_v = peg
                        middle, tail = f",{chain_s},{token},{symbol},", f"{peg_s},"
                        mid = slice(20, 20 + len(middle))
                        after = slice(20 + len(middle), None)
                        plain = True
            # The line is its time, ``middle``, its price cell and ``tail``: the time one
            # of fast_iso's checked 20-character texts (no comma in it), the slippage
            # cell empty and no cell after it.
            if plain:
                price_s, _, rest = text[after].partition(",")
                if rest == tail:
                    try:
                        ts = days[text[day]] + clocks[text[clock]]
                    except KeyError:
                        pass  # not cached yet: plain_tick below
                    else:
                        if price_s == last_price:
                            add(Tick(ts, chain_n, address, symbol_n, price, price_t, peg_v,
                                     peg_t))
                            continue
                        cell = price_s.strip()
                        try:
                            value = float(cell)  # "" too raises ValueError
                        except ValueError:
                            value = 0.0
                        # Positive and finite (NaN fails both tests).
                        if 0.0 < value < inf:
                            last_price, price, price_t = price_s, value, cell
                            add(Tick(ts, chain_n, address, symbol_n, price, price_t, peg_v,
                                     peg_t))
                            continue
            if text[-1:] == "\r":
                text = text[:-1]
            if text:
                add(_any_row(path, line, text.split(","), fields, names))
        if rows:
            yield rows


def _any_row(path: Path, line: int, row: list[str],
             fields: Callable[[list[str]], tuple[str, ...]],
             names: dict[tuple[str, str, str], tuple[str, str, str] | None]) -> Row:
    """The tick or bad row a canonical record gives (``row``: its cells, not empty)."""
    width = len(CSV_HEADER)
    if len(row) != width:
        # Short rows read empty cells; cells past the header are ignored.
        row = (row + [""] * (width - len(row)))[:width]
    row.append("")
    ts_text, chain_s, token, symbol, price_s, peg_s, slip_s, oracle_s, source = fields(row)
    known = known_names(chain_s, token, symbol, names)
    peg = plain_number(peg_s)
    tick = plain_tick(known, ts_text, price_s, peg, slip_s, oracle_s, source) \
        if known is not None and peg is not None else None
    return tick if tick is not None else _checked(
        path, line, ts_text, chain_s, token, symbol, price_s, peg_s, slip_s, oracle_s, source)


def _checked(path: Path, line: int, ts_text: str, chain_s: str, token: str, symbol: str,
             price_s: str, peg_s: str, slip_s: str, oracle_s: str, source: str) -> Row:
    """The authority: anything unusual, and every error, comes from make_tick."""
    try:
        return make_tick(ts_text, chain_s, token, symbol, price_s, peg_s, slip_s, oracle_s,
                         source)
    except BadTick as exc:
        return BadRow(str(path), line, exc.reason, exc.detail)


def read_jsonl(path: Path) -> Iterator[Row]:
    return chain.from_iterable(read_jsonl_batches(path))


def read_jsonl_batches(path: Path) -> Iterator[list[Row]]:
    """:func:`read_jsonl`'s rows in lists of up to :data:`LINES_BATCH`."""
    with path.open("rb") as fh:
        rows: list[Row] = []
        for line, raw in enumerate(fh, start=1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                rows.append(decode_tick(raw))
            except BadTick as exc:
                rows.append(BadRow(str(path), line, exc.reason, exc.detail))
            if len(rows) >= LINES_BATCH:
                yield rows
                rows = []
        if rows:
            yield rows


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
