"""Reading tick files: canonical CSV and JSON lines, with bad rows reported, never dropped.

Both formats are read as a stream of :class:`Row` results so a caller can count, report
and carry on: a bad row is a value, not an exception.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from pathlib import Path

from .chains import is_chain, normalize_address
from .ticks import CSV_HEADER, BadTick, Tick, decode_tick, make_tick
from .timefmt import fast_iso, parse_ts


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
        # The previous row's name cells and what they named: a file is mostly one token,
        # so comparing three short strings spares a tuple and its hash per row.
        last_chain = last_token = last_symbol = ""
        known: tuple[str, str, str] | None = None
        # Likewise the previous row's peg cell and what it read as: a file's peg is one
        # value nearly throughout, and parsing it was ~10 % of reading a plain row.
        last_peg = ""
        peg = _plain_number("")
        limit = csv.field_size_limit()
        line = 1
        for text in fh:
            line += 1
            # csv.reader's record, cut without it where it cannot differ: a line with no
            # quote (a quoted cell may span lines) and no cell over the field limit (an
            # error) is its cells split at commas, without the line end (only ever at
            # the end of a line read with newline=""). Anything else: csv.reader itself.
            if '"' in text or len(text) > limit:
                row = next(csv.reader(chain((text,), fh)), [])
            else:
                text = text.rstrip("\r\n")
                row = text.split(",") if text else []
            if len(row) != width:
                if not row:
                    continue
                # Short rows read empty cells; cells past the header are ignored.
                row = (row + [""] * (width - len(row)))[:width]
            if canonical:
                ts_text, chain_s, token, symbol, price_s, peg_s, slip_s = row
                oracle_s = source = ""
            else:
                row.append("")
                (ts_text, chain_s, token, symbol, price_s, peg_s, slip_s, oracle_s,
                 source) = fields(row)
            if chain_s != last_chain or token != last_token or symbol != last_symbol:
                last_chain, last_token, last_symbol = chain_s, token, symbol
                known = _known(chain_s, token, symbol, names)
            if peg_s != last_peg:
                last_peg = peg_s
                peg = _plain_number(peg_s)
            tick = _plain_tick(known, ts_text, price_s, peg, slip_s, oracle_s, source) \
                if known is not None and peg is not None else None
            if tick is not None:
                yield tick
                continue
            try:  # the authority: anything unusual, and every error, comes from make_tick
                yield make_tick(ts_text, chain_s, token, symbol, price_s, peg_s, slip_s,
                                oracle_s, source)
            except BadTick as exc:
                yield BadRow(str(path), line, exc.reason, exc.detail)


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
