"""JSON-lines tick files on the plain path (``monitor/jsonlplain.py``) read exactly as
``decode_tick`` reads each line: the same ticks, the same bad rows with the same reasons
and words, the same lines skipped. Files are runs of a few tokens' lines with names, pegs
and prices in every JSON type (a peg of 1, 1.0 and "1" read alike but are other texts),
valid or not, so the path's per-line reuse of the last line's names and peg is tested
against changes of every kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.tickfiles import BadRow, Row, read_file, read_jsonl_batches
from monitor.ticks import MAX_TICK_BYTES, BadTick, decode_tick

TOKENS = ["0x" + "ab" * 20, "0x" + "AB" * 20, "0x" + "cd" * 20, "0xabc"]
NUMBERS: list[Any] = ["1", "1.0", " 0.9995 ", "0.99", "", "NaN", "-1", "0", "1e999", "x",
                      1, 1.0, 0.9995, 0, -2, 2 ** 1023, 2 ** 1024, 10 ** 400, True, None]


def reference(path: Path) -> list[Row]:
    """What reading ``path`` line by line through ``decode_tick`` gives."""
    rows: list[Row] = []
    for line, raw in enumerate(path.read_bytes().splitlines(keepends=True), start=1):
        raw = raw.strip()
        if not raw:
            continue
        try:
            rows.append(decode_tick(raw))
        except BadTick as exc:
            rows.append(BadRow(str(path), line, exc.reason, exc.detail))
    return rows


@st.composite
def tick_line(draw: st.DrawFn, names: tuple[str, str, str], peg: Any) -> bytes:
    """One line of a run: mostly the run's names and peg, a time and a price; sometimes
    another peg, an extra field, a bad value or not JSON at all."""
    kind = draw(st.sampled_from(["plain"] * 4 + ["peg", "extra", "extra", "odd", "garbage",
                                                  "blank"]))
    if kind == "blank":
        return b"   "
    if kind == "garbage":
        return draw(st.sampled_from([b"not json", b"[1, 2]", b"{\"ts\": 1}",
                                     b"{\"pad\": \"" + b"x" * MAX_TICK_BYTES + b"\"}"]))
    chain, token, symbol = names
    ts = draw(st.integers(1_600_000_000, 1_700_000_000))
    record: dict[str, Any] = {
        "ts": draw(st.sampled_from([ts, float(ts) + 0.5, f"2023-03-11T07:{ts % 60:02d}:00Z"])),
        "chain": chain, "token": token, "symbol": symbol,
        "price_usd": draw(st.sampled_from(["1.0001", 0.998, 1, " 0.97 "]))
        if kind != "odd" else draw(st.sampled_from(NUMBERS)),
        "peg_usd": peg if kind != "peg" else draw(st.sampled_from(NUMBERS)),
    }
    if kind == "odd":
        record["ts"] = draw(st.sampled_from(
            [record["ts"], "1969-12-31T00:00:00Z", -5, "soon", 10 ** 400, True]))
    if kind == "extra":
        name = draw(st.sampled_from(["slippage_bps", "oracle_price_usd", "source",
                                     "cross_chain_spread_bps", "cross_chain_chains",
                                     "unknown_field"]))
        record[name] = draw(st.sampled_from(["spread", 3, "1.01", 12.5]))
    if draw(st.booleans()):  # the wire order, or any other
        record = dict(reversed(record.items()))
    return json.dumps(record).encode()


@st.composite
def jsonl_file(draw: st.DrawFn) -> bytes:
    lines: list[bytes] = []
    for _ in range(draw(st.integers(1, 4))):  # runs of one token's lines
        # Mostly names and a peg the plain path takes (a bad run is all bad rows).
        names = (draw(st.sampled_from(["eth", "eth", " ETH ", "arb", "solana"])),
                 draw(st.sampled_from([*TOKENS[:3], *TOKENS])),
                 draw(st.sampled_from(["USDC", " USDC ", ""])))
        peg = draw(st.sampled_from(["1", 1, 1.0, None]) | st.sampled_from(NUMBERS))
        lines += [draw(tick_line(names, peg)) for _ in range(draw(st.integers(1, 12)))]
    end = draw(st.sampled_from([b"\n", b"\r\n"]))
    return end.join(lines) + draw(st.sampled_from([b"", end]))


@settings(max_examples=300, deadline=None)
@given(jsonl_file())
def test_every_line_reads_as_decode_tick_reads_it(tmp_path_factory: Any, data: bytes) -> None:
    path = tmp_path_factory.mktemp("jsonl") / "ticks.jsonl"
    path.write_bytes(data)
    assert list(read_file(path)) == reference(path)


def test_a_long_run_reuses_names_and_peg_and_batches_cut_anywhere(tmp_path: Path) -> None:
    """2,500 lines of one token with a peg change (1 to 1.0: equal, other texts), read in
    batches of the module's size: the rows in order, each equal to decode_tick's, split
    over batches of at most 1,024."""
    lines = [json.dumps({"ts": 1_678_000_000 + 60 * i, "chain": "eth", "token": TOKENS[0],
                         "symbol": "USDC", "price_usd": f"{0.99 + i / 1e6:.6f}",
                         "peg_usd": 1 if i < 1_700 else 1.0}).encode() for i in range(2_500)]
    path = tmp_path / "ticks.ndjson"
    path.write_bytes(b"\n".join(lines) + b"\n")
    batches = list(read_jsonl_batches(path))
    assert [len(b) for b in batches] == [1_024, 1_024, 452]
    rows = [row for batch in batches for row in batch]
    assert rows == reference(path)
    assert {row.peg_text for row in rows if not isinstance(row, BadRow)} == {"1", "1.0"}
