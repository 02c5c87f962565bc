"""Reading tick files: canonical CSV and JSON lines, with bad rows reported, never dropped.

Both formats are read as a stream of :class:`Row` results so a caller can count, report
and carry on: a bad row is a value, not an exception.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from pathlib import Path

from .chains import is_chain, normalize_address
from .ticks import CSV_HEADER, BadTick, Tick, decode_tick, make_tick
from .timefmt import fast_iso, iso_caches, parse_ts


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


def read_csv(path: Path, block: int = BLOCK) -> Iterator[Row]:
    """The rows of a tick CSV file; ``block`` is the size of the reads of a canonical
    file's plain path (tests make it small to cross its edges)."""
    with path.open(newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh), None)
        if header is None:
            return
        col = {name.strip().lower(): i for i, name in enumerate(header)}
        missing = [c for c in ("ts", "chain", "token") if c not in col]
        if missing:
            yield BadRow(str(path), 1, "bad_header", f"missing columns {missing}")
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
            # The plain path: the file read in blocks and cut at "\n" by ``str.split``
            # (no readline per line), each row checked against the previous one's name
            # and peg cells and its time read from fast_iso's caches, all in this frame.
            # A block with a quote or a "\r" (csv.reader's business), or whose lines
            # could hold a cell over csv's field limit (an error), ends it: the rest of
            # the file, from the start of the block's first unfinished line, goes
            # through the loop below.
            days, clocks = iso_caches()
            last_chain = last_token = last_symbol = last_peg = ""
            # No cell holds a "\n": nothing is the last plain price before the first.
            last_price = "\n"
            known: tuple[str, str, str] | None = None
            peg = _plain_number("")
            chain_n = address = symbol_n = ""
            peg_v: float | None = None
            peg_t: str | None = None
            price = 0.0
            price_t = ""
            plain = False
            inf = math.inf
            # Slices made once: `text[:11]` builds a slice object each time in 3.11.
            day, clock = slice(11), slice(11, None)
            carry = ""
            size = max(1, min(block, limit))
            while True:
                text = fh.read(size)
                if not text:
                    if carry:
                        lines = iter((carry,))
                    break
                text = carry + text
                if text[-1] == "\r":  # its "\n", if any, with it
                    text += fh.read(1)
                # Lines end at "\n", perhaps after a "\r" (a "\r" alone ends a line too:
                # then every "\r" must start a "\r\n").
                crlf = text.count("\r\n")
                if '"' in text or len(text) > limit or text.count("\r") != crlf:
                    # Finish the line the block stopped in: the loop below starts at a
                    # line's start.
                    lines = chain(io.StringIO(text + fh.readline(), newline=""), fh)
                    break
                # Every line end a "\r\n": cut there, and no cell ends with a "\r".
                pieces = text.split("\r\n" if crlf and crlf == text.count("\n") else "\n")
                carry = pieces.pop()
                for text in pieces:
                    line += 1
                    row = text.split(",")
                    try:  # a row of another width raises, and is read below
                        ts_text, chain_s, token, symbol, price_s, peg_s, slip_s = row
                    except ValueError:
                        pass
                    else:
                        if chain_s != last_chain or token != last_token or \
                                symbol != last_symbol:
                            last_chain, last_token, last_symbol = chain_s, token, symbol
                            known = _known(chain_s, token, symbol, names)
                            if known is not None:
                                chain_n, address, symbol_n = known
                            plain = known is not None and peg is not None
                        if peg_s != last_peg:
                            last_peg = peg_s
                            peg = _plain_number(peg_s)
                            if peg is not None:
                                peg_t, peg_v = peg
                            plain = known is not None and peg is not None
                        if plain and not slip_s:
                            try:
                                # Only a 20-character text is in both caches this way.
                                ts = days[ts_text[day]] + clocks[ts_text[clock]]
                            except KeyError:
                                pass  # not cached yet: _plain_tick below
                            else:
                                if price_s == last_price:
                                    yield Tick(ts, chain_n, address, symbol_n, price,
                                               price_t, peg_v, peg_t)
                                    continue
                                cell = price_s.strip()
                                try:
                                    value = float(cell)  # "" too raises ValueError
                                except ValueError:
                                    value = 0.0
                                # Positive and finite (NaN fails both tests).
                                if 0.0 < value < inf:
                                    last_price, price, price_t = price_s, value, cell
                                    yield Tick(ts, chain_n, address, symbol_n, price,
                                               price_t, peg_v, peg_t)
                                    continue
                    if text[-1:] == "\r":
                        text = text[:-1]
                    if text:
                        yield _any_row(path, line, text.split(","), width, fields, names)
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
            if row:
                yield _any_row(path, line, row, width, fields, names)


def _any_row(path: Path, line: int, row: list[str], width: int,
             fields: Callable[[list[str]], tuple[str, ...]],
             names: dict[tuple[str, str, str], tuple[str, str, str] | None]) -> Row:
    """The tick or bad row a CSV record gives (``row``: its cells, not empty)."""
    if len(row) != width:
        # Short rows read empty cells; cells past the header are ignored.
        row = (row + [""] * (width - len(row)))[:width]
    row.append("")
    ts_text, chain_s, token, symbol, price_s, peg_s, slip_s, oracle_s, source = fields(row)
    known = _known(chain_s, token, symbol, names)
    peg = _plain_number(peg_s)
    tick = _plain_tick(known, ts_text, price_s, peg, slip_s, oracle_s, source) \
        if known is not None and peg is not None else None
    if tick is not None:
        return tick
    try:  # the authority: anything unusual, and every error, comes from make_tick
        return make_tick(ts_text, chain_s, token, symbol, price_s, peg_s, slip_s, oracle_s,
                         source)
    except BadTick as exc:
        return BadRow(str(path), line, exc.reason, exc.detail)


#: Distinct (chain, token, symbol) cells remembered per file; a file has a few tokens.
_MAX_NAMES = 10_000


def _known(chain: str, token: str, symbol: str,
           names: dict[tuple[str, str, str], tuple[str, str, str] | None],
           ) -> tuple[str, str, str] | None:
    """The (chain, address, symbol) a row's name cells give when :func:`make_tick` would
    accept them, else None; checked once per distinct cells (``names``)."""
    key = (chain, token, symbol)
    if key in names:
        return names[key]
    chain_n = chain.strip().lower()
    address = normalize_address(token)
    known = (chain_n, address, symbol.strip()[:32]) \
        if is_chain(chain_n) and address is not None else None
    if len(names) < _MAX_NAMES:
        names[key] = known
    return known


def _plain_number(text: str) -> tuple[str | None, float | None] | None:
    """A positive price-like cell as :func:`~monitor.ticks.make_tick` reads it: (its
    text, its value), (None, None) when empty; None when it is not a plain positive
    number (then ``make_tick`` decides)."""
    stripped = text.strip()
    if not stripped:
        return None, None
    try:
        value = float(stripped)
    except ValueError:
        return None
    # Positive and finite (``inf > 0`` but ``inf < inf`` is false; NaN fails both).
    return (stripped, value) if 0.0 < value < math.inf else None


def _plain_tick(known: tuple[str, str, str], ts_text: str, price_s: str,
                peg: tuple[str | None, float | None], slip_s: str, oracle_s: str,
                source: str) -> Tick | None:
    """The tick :func:`~monitor.ticks.make_tick` makes of a plain CSV row (ISO or epoch
    time, prices that are plain positive numbers) whose names :func:`_known` and peg
    cell :func:`_plain_number` accepted, without its per-field work; None for anything
    else (then ``make_tick`` decides, and words the error).

    Equal to ``make_tick`` on every row it accepts (tests/test_tickfiles_fast.py).
    """
    try:
        # ``parse_ts`` tries ``fast_iso`` first: called directly, a row in the usual shape
        # skips a call and its type tests.
        ts = fast_iso(ts_text)
        if ts is None:
            ts = parse_ts(ts_text)
        price_t = price_s.strip() or None
        price = float(price_t) if price_t is not None else None
        # An empty cell (the shared files' slippage, and the oracle and source cells a
        # canonical row does not have) is tested as it is: no ``strip`` call for nothing.
        slippage = None
        if slip_s:
            slip_t = slip_s.strip()
            slippage = float(slip_t) if slip_t else None
        oracle_t = (oracle_s.strip() or None) if oracle_s else None
        oracle = float(oracle_t) if oracle_t is not None else None
    except (ValueError, TypeError, OverflowError):
        return None
    # Positive and finite (``inf > 0`` but ``inf < inf`` is false; NaN fails both).
    if price is not None and not 0.0 < price < math.inf:
        return None
    if oracle is not None and not 0.0 < oracle < math.inf:
        return None
    if slippage is not None and not 0.0 <= slippage < math.inf:
        return None
    if price is None and slippage is None and oracle is None:
        return None
    return Tick(ts, known[0], known[1], known[2], price, price_t, peg[1], peg[0], slippage,
                oracle, source[:64] if source else source, oracle_t)


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
