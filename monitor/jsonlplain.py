"""A JSON-lines tick file's plain path: each line decoded once, and made into its tick
from its time and price alone when its names and peg are the last line's.

A JSON-lines file (a dump of ``depeg.ticks``, a producer's output) is mostly one token's
ticks in the wire shape, one after the other: the same chain, token, symbol and peg on
every line, no slippage, oracle price, source or spread. :func:`~monitor.ticks.decode_tick`
validates every field of every line (~20 k instructions a line beyond the decode, most of
a pure replay's reading); here a line whose name fields are the last line's reuses what
their check found (:func:`~monitor.tickrows.known_names`), its peg the last peg's reading,
and only its time and price are read. Any other line (extra fields, a value that is not
plainly valid, an undecodable line) goes to :func:`~monitor.ticks.tick_of` or
``decode_tick``, which stay the authority and word every error: the rows are
``decode_tick``'s on every line (``tests/test_jsonlplain.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import msgspec

from .tickrows import BadRow, Row, known_names, plain_number
from .ticks import MAX_TICK_BYTES, BadTick, Number, Tick, decode_tick, tick_decoder, tick_of
from .timefmt import parse_ts

__all__ = ["jsonl_batches"]


def _plain_value(value: Number) -> tuple[str | None, float | None] | None:
    """A positive price-like JSON value as ``make_tick`` reads it: (its text, its value),
    (None, None) when absent or empty; None when it is not plainly valid (``make_tick``
    decides, and words the error)."""
    if value is None:
        return None, None
    if type(value) is str:
        return plain_number(value)
    if type(value) is float:
        return (repr(value), value) if 0.0 < value < math.inf else None
    # An int, not a bool (its own type), and not past a float's range.
    if type(value) is int and 0 < value < 1 << 1023:
        return str(value), float(value)
    return None

def jsonl_batches(path: Path, batch: int) -> Iterator[list[Row]]:
    """The rows of a JSON-lines tick file in lists of up to ``batch``: a tick per line,
    or a :class:`~monitor.tickrows.BadRow` with ``decode_tick``'s reason; blank lines
    skipped."""
    decode = tick_decoder.decode
    names: dict[tuple[str, str, str], tuple[str, str, str] | None] = {}
    # The last line's name fields and what they named, and its peg value (and type: a
    # peg of 1 and one of 1.0 read as the same float with other texts) and its reading.
    last_chain = last_token = last_symbol = ""
    known: tuple[str, str, str] | None = None
    last_peg: Number = None
    peg: tuple[str | None, float | None] | None = (None, None)
    with path.open("rb") as fh:
        rows: list[Row] = []
        add = rows.append
        for line, raw in enumerate(fh, start=1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                try:
                    msg = decode(raw) if len(raw) <= MAX_TICK_BYTES else None
                except msgspec.DecodeError:
                    msg = None
                if msg is None:  # too large or undecodable: refused, in decode_tick's words
                    add(decode_tick(raw))
                    continue
                tick: Tick | None = None
                if (msg.slippage_bps is None and msg.oracle_price_usd is None
                        and not msg.source and msg.cross_chain_chains is None
                        and msg.cross_chain_spread_bps is None):
                    chain, token, symbol = msg.chain, msg.token, msg.symbol
                    if chain != last_chain or token != last_token or symbol != last_symbol:
                        last_chain, last_token, last_symbol = chain, token, symbol
                        known = known_names(chain, token, symbol, names)
                    peg_v = msg.peg_usd
                    if peg_v != last_peg or type(peg_v) is not type(last_peg):
                        last_peg = peg_v
                        peg = _plain_value(peg_v)
                    price = _plain_value(msg.price_usd)
                    if known is not None and peg is not None and price is not None \
                            and price[1] is not None:
                        try:
                            ts = parse_ts(msg.ts)
                        except (ValueError, TypeError, OverflowError):
                            pass  # refused below, in make_tick's words
                        else:
                            tick = Tick(ts, known[0], known[1], known[2], price[1],
                                        price[0], peg[1], peg[0])
                add(tick if tick is not None else tick_of(msg))
            except BadTick as exc:
                add(BadRow(str(path), line, exc.reason, exc.detail))
            if len(rows) >= batch:
                yield rows
                rows = []
                add = rows.append
        if rows:
            yield rows
