"""One CSV row's cells as :func:`~monitor.ticks.make_tick` reads them, without its per-field
work: the names and the peg cell checked once per distinct value, a plain row's tick; and
what a row that is not plain becomes (:func:`any_row`: a tick or a :class:`BadRow`).

Used by :mod:`monitor.tickfiles` and :mod:`monitor.csvplain`; ``make_tick`` stays the
authority on anything these decline (they return None) and on every error's wording.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .chains import is_chain, normalize_address
from .ticks import BadTick, Tick, make_tick
from .timefmt import fast_iso, parse_ts


@dataclass(frozen=True, slots=True)
class BadRow:
    """A row of a tick file that is not a tick: where it is and why (``reason`` is one of
    :data:`~monitor.ticks.BAD_TICK_REASONS`, or ``bad_header``)."""

    path: str
    line: int
    reason: str
    detail: str


Row = Tick | BadRow
#: The cells of a row as :func:`any_row` reads them: ts, chain, token, symbol, price, peg,
#: slippage, oracle price, source (a file's header decides where each one is).
Fields = Callable[[list[str]], tuple[str, ...]]

#: Distinct (chain, token, symbol) cells remembered per file; a file has a few tokens.
_MAX_NAMES = 10_000


def known_names(chain: str, token: str, symbol: str,
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


def plain_number(text: str) -> tuple[str | None, float | None] | None:
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


def plain_tick(known: tuple[str, str, str], ts_text: str, price_s: str,
                peg: tuple[str | None, float | None], slip_s: str, oracle_s: str,
                source: str) -> Tick | None:
    """The tick :func:`~monitor.ticks.make_tick` makes of a plain CSV row (ISO or epoch
    time, prices that are plain positive numbers) whose names :func:`known_names` and peg
    cell :func:`plain_number` accepted, without its per-field work; None for anything
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
    except (ValueError, TypeError, OverflowError):
        return None
    # Positive and finite (``inf > 0`` but ``inf < inf`` is false; NaN fails both).
    if price is not None and not 0.0 < price < math.inf:
        return None
    if not (slip_s or oracle_s or source):  # the shared files' rows: no call for nothing
        if price is None:
            return None
        return Tick(ts, known[0], known[1], known[2], price, price_t, peg[1], peg[0])
    extras = plain_extras(slip_s, oracle_s, source)
    if extras is None:
        return None
    slippage, oracle, oracle_t, source = extras
    if price is None and slippage is None and oracle is None:
        return None
    return Tick(ts, known[0], known[1], known[2], price, price_t, peg[1], peg[0], slippage,
                oracle, source, oracle_t)


#: What :func:`plain_extras` reads: slippage, oracle price, its text, source.
Extras = tuple[float | None, float | None, str | None, str]


def plain_extras(slip_s: str, oracle_s: str, source: str) -> Extras | None:
    """The cells after the peg as :func:`~monitor.ticks.make_tick` reads them when they
    are plain (slippage a number >= 0, the oracle price a positive one, or empty), else
    None (then ``make_tick`` decides)."""
    try:
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
    if oracle is not None and not 0.0 < oracle < math.inf:
        return None
    if slippage is not None and not 0.0 <= slippage < math.inf:
        return None
    return slippage, oracle, oracle_t, source[:64] if source else source


def any_row(path: Path, line: int, row: list[str], width: int, fields: Fields,
            names: dict[tuple[str, str, str], tuple[str, str, str] | None]) -> Row:
    """The tick or bad row a record of a file with ``width`` columns gives (``row``: its
    cells, not empty; ``fields`` picks make_tick's from them and the empty cell appended)."""
    if len(row) != width:
        # Short rows read empty cells; cells past the header are ignored.
        row = (row + [""] * (width - len(row)))[:width]
    row.append("")
    ts_text, chain_s, token, symbol, price_s, peg_s, slip_s, oracle_s, source = fields(row)
    known = known_names(chain_s, token, symbol, names)
    peg = plain_number(peg_s)
    tick = plain_tick(known, ts_text, price_s, peg, slip_s, oracle_s, source) \
        if known is not None and peg is not None else None
    return tick if tick is not None else checked_row(
        path, line, ts_text, chain_s, token, symbol, price_s, peg_s, slip_s, oracle_s, source)


def checked_row(path: Path, line: int, ts_text: str, chain_s: str, token: str, symbol: str,
                price_s: str, peg_s: str, slip_s: str, oracle_s: str, source: str) -> Row:
    """The authority: anything unusual, and every error, comes from make_tick."""
    try:
        return make_tick(ts_text, chain_s, token, symbol, price_s, peg_s, slip_s, oracle_s,
                         source)
    except BadTick as exc:
        return BadRow(str(path), line, exc.reason, exc.detail)
