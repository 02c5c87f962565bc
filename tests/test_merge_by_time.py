"""``merge_by_time`` gives the order the replay has always had: ``heapq.merge`` of the
rows keyed ``(newest tick time of its stream, stream index, row number)``.

The merge is now a plain scan over the streams' waiting rows (no key tuple and no
generator per row); the truth here is the old definition, written out with
``heapq.merge``, on streams that are sorted, unsorted, tied, empty, and carry bad rows
(which have no time and keep their stream's newest tick time).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.tickfiles import BadRow, Row, merge_by_time
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
