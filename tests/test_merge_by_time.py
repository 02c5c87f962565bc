"""``merge_by_time`` gives the order the replay has always had: ``heapq.merge`` of the
rows keyed ``(newest tick time of its stream, stream index, row number)``.

The merge is now a plain scan over the streams' waiting rows (no key tuple and no
generator per row); the truth here is the old definition, written out with
``heapq.merge``, on streams that are sorted, unsorted, tied, empty, and carry bad rows
(which have no time and keep their stream's newest tick time).

``merge_batches`` (the replay's merge, over lists of rows) hands on exactly the rows
``merge_by_time`` yields, however each stream is cut into lists: sorted lists are
bisected, others (bad rows, times going back) read row by row.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from itertools import chain, pairwise
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.tickfiles import BadRow, Row, merge_by_time, read_file, read_file_batches
from monitor.tickmerge import merge_batches
from monitor.ticks import Tick


def reference(streams: list[list[Row]]) -> list[Row]:
    def keyed(index: int, rows: list[Row]) -> Iterator[tuple[float, int, int, Row]]:
        last = 0.0
        for seq, row in enumerate(rows):
            if isinstance(row, Tick):
                last = row.ts
            yield (last, index, seq, row)

    return [row for *_, row in heapq.merge(*(keyed(i, s) for i, s in enumerate(streams)))]


def row(stream: int, n: int, ts: float | None) -> Row:
    """A tick at ``ts`` (None: a bad row), told apart from every other by its source."""
    if ts is None:
        return BadRow(f"file{stream}", n, "bad_price", "x")
    return Tick(ts, "eth", "0x" + "0" * 40, "T", 1.0, "1", source=f"{stream}:{n}")


times = st.one_of(st.none(), st.sampled_from([0.0, 60.0, 120.0]),
                  st.floats(min_value=0, max_value=1e6))
files = st.lists(st.lists(times, max_size=12), max_size=5)


@settings(max_examples=400, deadline=None)
@given(files)
def test_the_merge_is_heapq_merge_of_the_keyed_rows(spec: list[list[float | None]]) -> None:
    streams = [[row(i, n, ts) for n, ts in enumerate(s)] for i, s in enumerate(spec)]
    merged = list(merge_by_time(iter(s) for s in streams))
    assert merged == reference(streams)


def test_time_ordered_files_interleave_by_time_first_file_on_ties() -> None:
    a = [row(0, n, ts) for n, ts in enumerate([0.0, 60.0, 120.0])]
    b = [row(1, n, ts) for n, ts in enumerate([60.0, 90.0])]
    merged = list(merge_by_time([iter(a), iter(b)]))
    assert merged == [a[0], a[1], b[0], b[1], a[2]]


batch_times = st.one_of(st.none(), st.sampled_from([0.0, 60.0, 60.0, 120.0, 180.0]),
                  st.floats(min_value=0, max_value=1e6))
#: A stream: its times, then where it is cut into lists (cut points, any order).
streams_spec = st.lists(
    st.tuples(st.lists(batch_times, max_size=16), st.lists(st.integers(0, 16), max_size=5),
              st.booleans()),
    max_size=5)


def cut(rows: list[Row], points: list[int], empty: bool) -> list[list[Row]]:
    """``rows`` in lists cut at ``points`` (with empty lists between when ``empty``)."""
    edges = sorted({0, len(rows), *(p for p in points if p <= len(rows))})
    lists = [rows[a:b] for a, b in pairwise(edges)]
    return [x for part in lists for x in ([part, []] if empty else [part])]


@settings(max_examples=600, deadline=None)
@given(spec=streams_spec, sort=st.booleans())
def test_the_batched_merge_is_merge_by_time(
        spec: list[tuple[list[float | None], list[int], bool]], sort: bool) -> None:
    streams = []
    for i, (ts, _, _) in enumerate(spec):
        if sort:  # mostly sorted runs, the case the bisection takes
            ts = sorted(ts, key=lambda t: -1.0 if t is None else t)
        streams.append([row(i, n, t) for n, t in enumerate(ts)])
    batched = [cut(s, points, empty) for s, (_, points, empty) in zip(streams, spec,
                                                                      strict=True)]
    got = list(chain.from_iterable(merge_batches(iter(b) for b in batched)))
    assert got == list(merge_by_time(iter(s) for s in streams))
    assert got == reference(streams)


def test_runs_between_sparse_ticks_go_on_in_whole_lists() -> None:
    """A one-minute stream between another's daily ticks: few, long lists."""
    minute = [row(0, n, 60.0 * n) for n in range(3000)]
    daily = [row(1, n, 86_400.0 * n + 30.0) for n in range(3)]
    lists = list(merge_batches([iter([minute[:1000], minute[1000:]]), iter([daily])]))
    flat = [x for part in lists for x in part]
    assert flat == reference([minute, daily])
    # minute 0, daily 0, the rest of the first list, minutes to daily 1, daily 1, to
    # daily 2, daily 2, the rest: eight lists for 3,003 rows.
    assert len(lists) == 8


def test_files_read_in_lists_give_the_rows_read_one_by_one(tmp_path: Path) -> None:
    csv_path = tmp_path / "a.csv"
    csv_path.write_text("ts,chain,token,symbol,price_usd,peg_usd,slippage_bps\n" + "".join(
        f"2023-03-11T07:{n:02d}:00Z,eth,0x{'a' * 40},USDC,0.99,1,\n" for n in range(50)))
    json_path = tmp_path / "b.jsonl"
    json_path.write_text("".join(
        f'{{"ts": "2023-03-11T07:{n:02d}:30Z", "chain": "eth", "token": "0x{"b" * 40}",'
        f' "price_usd": "1.01", "peg_usd": "1"}}\n' + ("not json\n" if n % 7 == 0 else "")
        for n in range(50)))
    paths = [csv_path, json_path]
    got = list(chain.from_iterable(merge_batches(read_file_batches(p) for p in paths)))
    assert got == list(merge_by_time(read_file(p) for p in paths))
    assert len(got) == 108
