"""The CSV reader's plain-row path gives exactly the tick ``make_tick`` gives, or defers.

``read_csv`` turns a plain row into a tick without ``make_tick``'s per-field work; any
row it is not sure of goes to ``make_tick``, which stays the one authority on what a
tick is and how a bad one is worded. The truth here is ``make_tick`` itself, on rows
full of near-misses (spaces, signs, zeros, infinities, odd addresses and chains).
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.tickfiles import BLOCK, BadRow, read_csv
from monitor.tickrows import known_names, plain_number, plain_tick
from monitor.ticks import BadTick, Tick, make_tick

ADDRESS = "0xA0b86991c6218b36c1d19d4a2e9eb0ce3606eB48"
#: ts, chain, token, symbol, price, peg, slippage, oracle price, source: make_tick's fields.
Row = tuple[str, str, str, str, str, str, str, str, str]

numbers = st.sampled_from([
    "", " ", "1", "0.9996143", " 1.0002 ", "0", "-0", "-1", "1e400", "inf", "nan", "1_000",
    "abc", "0x10", "1e-320", "  -0.0", "+2", "3.", ".5",
]) | st.floats(allow_nan=True).map(repr)
cells = st.tuples(
    st.sampled_from(["2023-03-11T07:50:00Z", "2023-03-11T07:50:00.250Z", "1678521000",
                     "2023-03-11 07:50:00", "2023-02-30T00:00:00Z", "2023-03-11T24:00:00Z",
                     "", "x", "-5", "nan", "2023-03-11T07:50:00+02:00"]),
    st.sampled_from(["eth", " ETH ", "Eth", "mars", ""]),
    st.sampled_from([ADDRESS, ADDRESS.lower(), f" {ADDRESS} ", "0x123", ""]),
    st.sampled_from(["USDC", " USDC ", "", "X" * 40]),
    numbers, numbers, numbers, numbers,
    st.sampled_from(["", "binance", "s" * 80]),
)


def outcome(row: Row) -> Tick | tuple[str, str]:
    try:
        return make_tick(*row)
    except BadTick as exc:
        return exc.reason, exc.detail


@settings(max_examples=1000, deadline=None)
@given(row=cells)
def test_a_plain_row_is_the_tick_make_tick_makes(row: Row) -> None:
    ts_text, chain, token, symbol, price, peg, slip, oracle, source = row
    known = known_names(chain, token, symbol, {})
    pegged = plain_number(peg)
    fast = None if known is None or pegged is None else plain_tick(
        known, ts_text, price, pegged, slip, oracle, source)
    if fast is not None:
        assert fast == outcome(row)
        assert repr(fast) == repr(outcome(row))  # -0.0 and 0.0 are equal, not the same


#: The canonical headers (monitor/csvplain.py PLAIN_HEADERS): the shared files' seven
#: columns, the producers' eight, and those with ``source``.
HEADER = ["ts", "chain", "token", "symbol", "price_usd", "peg_usd", "slippage_bps",
          "oracle_price_usd", "source"]


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(cells, min_size=1, max_size=20), columns=st.sampled_from([7, 8, 9]),
       repeat=st.integers(1, 3), block=st.sampled_from([BLOCK, 5, 40, 97]))
def test_read_csv_yields_what_make_tick_decides(
        tmp_path_factory: pytest.TempPathFactory, rows: list[Row], columns: int,
        repeat: int, block: int) -> None:
    import csv

    folder = tmp_path_factory.mktemp("csv")
    path = Path(folder) / "ticks.csv"
    header = HEADER[:columns]
    # Each row ``repeat`` times in a run: the reader remembers the last cells it read.
    rows = [row for row in rows for _ in range(repeat)]
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for row in rows:
            writer.writerow(row[:len(header)])
    got = list(read_csv(path, block))
    expected = []
    for line, row in enumerate(rows, start=2):
        full = cast(Row, (*row[:columns], *([""] * (9 - columns))))
        result = outcome(full)
        expected.append(result if isinstance(result, Tick)
                        else BadRow(str(path), line, result[0], result[1]))
    assert [repr(x) for x in got] == [repr(x) for x in expected]


def test_short_and_long_rows_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "ticks.csv"
    path.write_text(
        "ts,chain,token,price_usd,peg_usd\n"
        f"2023-03-11T07:50:00Z,eth,{ADDRESS},0.99\n"           # short: no peg
        f"2023-03-11T07:51:00Z,eth,{ADDRESS},0.98,1,extra\n"   # long: the extra is ignored
        "\n"
        f"2023-03-11T07:52:00Z,eth,{ADDRESS}\n")               # nothing observed
    got = list(read_csv(path))
    assert got[0] == make_tick("2023-03-11T07:50:00Z", "eth", ADDRESS, "", "0.99")
    assert got[1] == make_tick("2023-03-11T07:51:00Z", "eth", ADDRESS, "", "0.98", "1")
    assert isinstance(got[2], BadRow) and got[2].reason == "no_observation" \
        and got[2].line == 5
    assert len(got) == 3


def expected_rows(path: Path) -> list[Tick | BadRow]:
    """The independent truth: csv.reader's records, each through ``make_tick``."""
    import csv

    with path.open(newline="", encoding="utf-8") as fh:
        records = list(csv.reader(fh))
    width = len(records[0])
    expected: list[Tick | BadRow] = []
    for line, row in enumerate(records[1:], start=2):
        if not row:
            continue
        cells = (row + [""] * width)[:width]
        assert 7 <= width <= 9, f"{path} has {width} columns, not 7, 8 or 9"
        full = (*cells, *([""] * (9 - width)))
        result = outcome(cast(Row, full))
        expected.append(result if isinstance(result, Tick)
                        else BadRow(str(path), line, result[0], result[1]))
    return expected


GOOD = f"2023-03-11T07:50:00Z,eth,{ADDRESS},USDC,0.99,1,"
pieces = st.sampled_from([
    GOOD, "\n", "\r\n", "\r", ",", '"', '""', " ", "1", "0.98", "eth", ADDRESS, "x",
    f'"{GOOD}"', '"a\nb"', '"1,0"', "\t", "2023-03-11T07:51:00Z", "\x00",
    f"{GOOD}\r\n", f"{GOOD}\n", f"2023-03-11T07:52:00Z,eth,{ADDRESS},USDC,0.98,1,\r\n",
    f"2023-03-11T07:53:00Z,eth,{ADDRESS},USDC, 0.98 ,1,5\n", "2023-03-11T07:54:00Z,eth,",
    "USDC,1.0,1,", ",1,\r\n", "2023-03-11T07:55:0", "0Z", "x\r\n",
])
#: Read sizes of the canonical path: its blocks end anywhere, "\r\n" cut in two too.
blocks = st.sampled_from([BLOCK, 1, 2, 3, 7, 20, 64, 101])


@settings(max_examples=600, deadline=None)
@given(body=st.lists(pieces, max_size=30), end=st.sampled_from(["", "\n", "\r\n"]),
       oracle=st.booleans(), block=blocks)
def test_lines_split_without_csv_reader_read_as_csv_reader_reads_them(
        tmp_path_factory: object, body: list[str], end: str, oracle: bool,
        block: int) -> None:
    """The reader cuts quote-free lines at commas itself (a canonical file in blocks of
    ``block`` characters); what it yields is what csv.reader's records give, line numbers
    too, whatever quotes, line ends, blank lines and NULs, wherever a block ends."""
    import csv

    folder = tmp_path_factory.mktemp("lines")  # type: ignore[attr-defined]
    path = Path(folder) / "ticks.csv"
    header = "ts,chain,token,symbol,price_usd,peg_usd,slippage_bps"
    if oracle:
        header += ",oracle_price_usd,source"
    path.write_bytes(f"{header}\n{''.join(body)}{end}".encode())
    try:
        expected: list[Tick | BadRow] | type[Exception] = expected_rows(path)
    except csv.Error:
        expected = csv.Error
    try:
        got: list[Tick | BadRow] | type[Exception] = list(read_csv(path, block))
    except csv.Error:
        got = csv.Error
    assert (got if isinstance(got, type) else [repr(x) for x in got]) == (
        expected if isinstance(expected, type) else [repr(x) for x in expected])


def test_a_cell_over_the_csv_field_limit_is_still_csv_readers_error(tmp_path: Path) -> None:
    import csv

    path = tmp_path / "ticks.csv"
    path.write_text("ts,chain,token,symbol,price_usd,peg_usd,slippage_bps\n"
                    f"{GOOD}\n" + "x" * (csv.field_size_limit() + 1) + "\n")
    rows = read_csv(path)
    assert isinstance(next(rows), Tick)
    try:
        next(rows)
    except csv.Error as exc:
        assert "field larger than field limit" in str(exc)
    else:
        raise AssertionError("a cell over the limit was read")


def test_rows_read_line_by_line_come_before_a_csv_error(tmp_path: Path) -> None:
    """A file off the canonical path (here: with the oracle column) is read in lists of
    rows; csv.reader's error still comes after every row before it."""
    import csv

    path = tmp_path / "ticks.csv"
    path.write_text("ts,chain,token,symbol,price_usd,peg_usd,slippage_bps,oracle_price_usd\n"
                    + f"{GOOD},1.0\n" * 3 + "x" * (csv.field_size_limit() + 1) + "\n")
    rows = read_csv(path)
    assert [isinstance(next(rows), Tick) for _ in range(3)] == [True] * 3
    try:
        next(rows)
    except csv.Error as exc:
        assert "field larger than field limit" in str(exc)
    else:
        raise AssertionError("a cell over the limit was read")


def test_a_repeated_peg_cell_reads_as_make_tick_reads_each(tmp_path: Path) -> None:
    """The reader parses a peg cell once per change: runs of good, bad and empty pegs, each
    repeated, still give make_tick's tick or refusal row by row."""
    pegs = ["1", "1", "0", "0", "1", "", "", " 1 ", " 1 ", "x", "1", "inf", "inf", "1.0", "1"]
    path = tmp_path / "ticks.csv"
    path.write_text("ts,chain,token,symbol,price_usd,peg_usd,slippage_bps\n" + "".join(
        f"2023-03-11T07:{n:02d}:00Z,eth,{ADDRESS},USDC,0.99,{peg},\n"
        for n, peg in enumerate(pegs)))
    got = list(read_csv(path))
    assert [repr(x) for x in got] == [repr(x) for x in expected_rows(path)]
    assert sum(isinstance(x, BadRow) for x in got) == 5


#: One token's rows as a feed writes them: the same name and peg cells, the time in one
#: shape (ISO, or whole epoch seconds; now and then another), prices often repeated, and
#: the cells after the peg plain, empty or odd. The reader takes such rows from the last
#: plain row's cells (monitor/csvplain.py): each must still be make_tick's tick or refusal.
run_rows = st.lists(st.tuples(
    st.integers(0, 400),  # minutes after the first row (in order or not)
    st.sampled_from(["iso", "epoch", "epoch", "iso", "other"]),
    st.sampled_from(["0.9996", "0.9996", "1.0001", " 0.98 ", "0", "", "x", "1e400"]),
    st.sampled_from(["", "", "12.5", "0", " 3 ", "-1", "nan", "x", "1e400", "0x1"]),
    st.sampled_from(["", "", "1.0002", "0.9999", " 1 ", "0", "-2", "inf", "y"]),
    st.sampled_from(["", "", "binance", " spaced ", "s" * 80]),
    st.sampled_from(["1", "1", "1", "1.0", "", "0"]),
), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(rows=run_rows, columns=st.sampled_from([7, 8, 9]), epoch_first=st.booleans(),
       ends=st.sampled_from(["\n", "\r\n", "mixed"]), block=blocks)
def test_a_feeds_rows_read_as_make_tick_reads_each(
        tmp_path_factory: pytest.TempPathFactory,
        rows: list[tuple[int, str, str, str, str, str, str]], columns: int,
        epoch_first: bool, ends: str, block: int) -> None:
    import datetime as dt

    base = dt.datetime(2023, 3, 11, tzinfo=dt.UTC)
    lines = []
    for n, (minutes, shape, price, slip, oracle, source, peg) in enumerate(rows):
        when = base + dt.timedelta(minutes=minutes)
        if shape == "other":
            stamp = when.strftime("%Y-%m-%d %H:%M:%S")  # parse_ts reads it; not plain
        elif (shape == "epoch") != (epoch_first and n == 0):
            stamp = str(int(when.timestamp()))
        else:
            stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        cells = [stamp, "eth", ADDRESS, "USDC", price, peg, slip, oracle, source][:columns]
        end = ("\r\n" if n % 2 else "\n") if ends == "mixed" else ends
        lines.append(",".join(cells) + end)
    folder = tmp_path_factory.mktemp("feed")
    path = Path(folder) / "ticks.csv"
    path.write_bytes((",".join(HEADER[:columns]) + "\n" + "".join(lines)).encode())
    got = list(read_csv(path, block))
    assert [repr(x) for x in got] == [repr(x) for x in expected_rows(path)]


def test_the_producers_files_with_epoch_times_read_as_make_tick_reads_them(
        tmp_path: Path) -> None:
    """The producers' eight columns, a slippage and an oracle price in every row, whole
    epoch seconds: each row is make_tick's tick."""
    path = tmp_path / "ticks.csv"
    path.write_text(",".join(HEADER[:8]) + "\n" + "".join(
        f"{1678521000 + 60 * n},eth,{ADDRESS},USDC,{0.99 + n / 1e4:.4f},1,{n % 7}.5,"
        f"{1 + n / 1e5:.5f}\n" for n in range(200)))
    got = list(read_csv(path))
    assert [repr(x) for x in got] == [repr(x) for x in expected_rows(path)]
    assert len(got) == 200
    assert all(isinstance(x, Tick) and x.slippage_bps is not None for x in got)


@pytest.mark.parametrize("stamp", ["{:d}", "2023-03-11T07:50:00Z"])
def test_a_cr_before_a_line_end_is_not_part_of_the_last_cell(tmp_path: Path,
                                                              stamp: str) -> None:
    """"\r\n" and "\n" in one file: the lines are cut at "\n", so a row read from the last
    row's cells ends with the "\r", which csv.reader takes as the line's end."""
    path = tmp_path / "ticks.csv"
    path.write_bytes((",".join(HEADER) + "\n" + "".join(
        f"{stamp.format(1678521000 + 60 * n)},eth,{ADDRESS},USDC,0.99,1,{n % 3},1.0,binance"
        + ("\r\n" if n % 2 else "\n") for n in range(12))).encode())
    got = list(read_csv(path))
    assert [repr(x) for x in got] == [repr(x) for x in expected_rows(path)]
    assert {x.source for x in got if isinstance(x, Tick)} == {"binance"}
