"""The CSV reader's plain-row path gives exactly the tick ``make_tick`` gives, or defers.

``read_csv`` turns a plain row into a tick without ``make_tick``'s per-field work; any
row it is not sure of goes to ``make_tick``, which stays the one authority on what a
tick is and how a bad one is worded. The truth here is ``make_tick`` itself, on rows
full of near-misses (spaces, signs, zeros, infinities, odd addresses and chains).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.tickfiles import BadRow, _plain_tick, read_csv
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
    fast = _plain_tick(row, {})
    if fast is not None:
        assert fast == outcome(row)
        assert repr(fast) == repr(outcome(row))  # -0.0 and 0.0 are equal, not the same


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(cells, min_size=1, max_size=20), oracle=st.booleans())
def test_read_csv_yields_what_make_tick_decides(
        tmp_path_factory: pytest.TempPathFactory, rows: list[Row], oracle: bool) -> None:
    import csv

    folder = tmp_path_factory.mktemp("csv")
    path = Path(folder) / "ticks.csv"
    header = ["ts", "chain", "token", "symbol", "price_usd", "peg_usd", "slippage_bps"]
    if oracle:
        header += ["oracle_price_usd", "source"]
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for row in rows:
            writer.writerow(row[:len(header)])
    got = list(read_csv(path))
    expected = []
    for line, row in enumerate(rows, start=2):
        full: Row = row if oracle else (*row[:7], "", "")
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
