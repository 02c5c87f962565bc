"""A canonical tick CSV's plain path: read in blocks, each row made into its tick by
comparing it with the last plain row's cells, without csv.reader, a split per row or a
parse of a cell that did not change.

Canonical means one of :data:`PLAIN_HEADERS`: the shared files' seven columns, the eight
the producers write (``producers/csvout.py``: the oracle price too), or those and
``source``. A file is mostly one token's rows, its chain, token, symbol and peg cells the
same from row to row, its time in one shape: ISO (``2023-03-11T07:50:00Z``, read from
``fast_iso``'s caches) or whole epoch seconds. A row whose cells around its price are
the template's (the last plain row's) is read from its time and price cells alone, and
its cells after the peg (slippage, oracle price, source) only when they differ from the
last row's. Any other row is split and read as :func:`~monitor.tickrows.any_row` reads it,
and becomes the template when it is plain. ``make_tick`` stays the authority: a row this
path is not sure of goes to it (``tests/test_tickfiles_fast.py`` compares every row with
``make_tick`` over csv.reader's records).
"""

from __future__ import annotations

import io
import math
from collections.abc import Generator, Iterator
from itertools import chain
from pathlib import Path
from typing import Final, TextIO

from .tickrows import (
    Extras,
    Fields,
    Row,
    any_row,
    checked_row,
    known_names,
    plain_extras,
    plain_number,
    plain_tick,
)
from .ticks import CSV_HEADER, CSV_HEADER_WITH_ORACLE, Tick
from .timefmt import iso_caches

#: The headers read on the plain path, and their widths (every other header is read line
#: by line, its cells picked by column name).
PLAIN_HEADERS: Final = {
    CSV_HEADER: len(CSV_HEADER),
    CSV_HEADER_WITH_ORACLE: len(CSV_HEADER_WITH_ORACLE),
    (*CSV_HEADER_WITH_ORACLE, "source"): len(CSV_HEADER_WITH_ORACLE) + 1,
}
#: The columns before the ones after the peg (ts, chain, token, symbol, price, peg).
_LEADING: Final = 6


def plain_blocks(path: Path, fh: TextIO, block: int, limit: int, width: int, fields: Fields,
                 names: dict[tuple[str, str, str], tuple[str, str, str] | None],
                 ) -> Generator[list[Row], None, tuple[int, Iterator[str]]]:
    """The rows of a file with one of :data:`PLAIN_HEADERS` (``width`` columns), read in
    blocks of ``block`` characters and cut into lines by ``str.split`` (no readline per
    line); one list of rows per block. A block with a quote, a lone "\r" (csv.reader's
    business) or more than csv's field limit of characters (a cell could be over it: an
    error) ends it; returns the last line number read and the rest of the file's lines,
    from the start of the first unfinished one, for the caller's own line loop."""
    days, clocks = iso_caches()
    inf = math.inf
    extra_cells = width - _LEADING
    extras: Extras | None = None
    line = 1
    # The template: the last plain row's cells between its time and its price
    # (``middle``), and after its price (``tail``: the peg cell, its comma and the cells
    # after it), with what they read as; "\n" (in no line) before the first. Its time
    # cell is ISO (``iso``) or whole epoch seconds, ``stamp`` wide.
    middle = tail = pegged = "\n"
    cut = 0  # len(pegged)
    iso = True
    # The template's time cell is ``text[:width_ts]``, its middle ``text[width_ts:start]``
    # and the price onwards ``text[start:]``. Integer bounds, not slice objects made once:
    # the compiled build cuts a str by integers natively and by a slice object through
    # the generic subscript, four cuts a row (the compiled replay of the shared files:
    # -4.1 % instructions); the interpreter builds a slice per cut, which the pure
    # replay's count does not show (under 0.2 %; docs/performance.md, forty-third pass).
    width_ts = start = 0
    chain_n = address = symbol_n = ""
    peg_v: float | None = None
    peg_t: str | None = None
    slippage: float | None = None
    oracle: float | None = None
    oracle_t: str | None = None
    source = ""
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
            # Finish the line the block stopped in: the caller's loop starts at a line's
            # start.
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
            # The template's cells around the price? (A slice and ``==``, not
            # ``startswith(middle, 20)``: a method with arguments parsed from a tuple
            # costs more than a copy of ~50 characters.)
            if text[width_ts:start] == middle:
                price_s, _, rest = text[start:].partition(",")
                # The template's cells after the price, or the same peg and other cells
                # after it (read here when plain: no "\r", as many as the header has).
                if rest == tail or (rest[:cut] == pegged and (
                        extras := _extras(rest[cut:], extra_cells)) is not None):
                    if extras is not None:  # (the second test above: new cells)
                        slippage, oracle, oracle_t, source = extras
                        tail = rest
                        extras = None
                    if iso:
                        try:
                            ts = days[text[:11]] + clocks[text[11:20]]
                        except KeyError:
                            ts = -1.0  # a day or clock not cached yet: read below
                    else:
                        ts = _whole_seconds(text[:width_ts])
                    if ts >= 0.0:
                        if price_s == last_price:
                            add(Tick(ts, chain_n, address, symbol_n, price, price_t, peg_v,
                                     peg_t, slippage, oracle, source, oracle_t))
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
                                     peg_t, slippage, oracle, source, oracle_t))
                            continue
            # Any other row: its cells, read as any_row reads them.
            if text[-1:] == "\r":
                text = text[:-1]
            if not text:
                continue
            cells = text.split(",")
            if len(cells) != width:
                add(any_row(path, line, cells, width, fields, names))
                continue
            ts_text, chain_s, token, symbol, price_s, peg_s = cells[:_LEADING]
            slip_s = cells[6]
            oracle_s = cells[7] if width > 7 else ""
            source_s = cells[8] if width > 8 else ""
            known = known_names(chain_s, token, symbol, names)
            peg = plain_number(peg_s)
            tick = plain_tick(known, ts_text, price_s, peg, slip_s, oracle_s, source_s) \
                if known is not None and peg is not None else None
            if tick is None:
                add(checked_row(path, line, ts_text, chain_s, token, symbol, price_s, peg_s,
                                slip_s, oracle_s, source_s))
                continue
            add(tick)
            if known is None or peg is None or tick.price is None or tick.price_text is None:
                continue
            # A plain row with a price: the template now. Its time is ISO when 20 wide
            # (fast_iso has just cached its day and clock if it is; if not, the rows
            # after it are read below, one by one), else whole epoch seconds (or read
            # below: see _whole_seconds).
            iso = len(ts_text) == 20
            chain_n, address, symbol_n = known
            peg_t, peg_v = peg
            middle = f",{chain_s},{token},{symbol},"
            width_ts = len(ts_text)
            start = width_ts + len(middle)
            pegged = f"{peg_s},"
            cut = len(pegged)
            tail = text[start + len(price_s) + 1:]
            slippage, oracle, oracle_t, source = (tick.slippage_bps, tick.oracle_price,
                                                  tick.oracle_text, tick.source)
            last_price, price, price_t = price_s, tick.price, tick.price_text
        if rows:
            yield rows


def _whole_seconds(text: str) -> float:
    """An epoch template's time cell as parse_ts reads it when it is whole seconds in
    ASCII digits (no sign, space, point or exponent: float() takes them as written, and
    they are finite and not negative), else -1.0 (then the row is read below)."""
    if text.isdigit() and text.isascii():
        seconds = float(text)
        if seconds < math.inf:
            return seconds
    return -1.0


def _extras(cells: str, count: int) -> Extras | None:
    """The ``count`` cells after a row's peg (``cells``: them and their commas) as
    :func:`~monitor.tickrows.plain_extras` reads them, or None: not that many, a "\r"
    (csv.reader's line end, never a cell's here), or not plain."""
    if "\r" in cells:
        return None
    if count == 1:  # the seven columns: the slippage cell alone (no list for it)
        return None if "," in cells else plain_extras(cells, "", "")
    parts = cells.split(",")
    if len(parts) != count:
        return None
    return plain_extras(parts[0], parts[1], parts[2] if count > 2 else "")
