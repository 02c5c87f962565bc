"""Time-ordered files merged in lists of rows: :func:`~monitor.tickfiles.merge_by_time`'s
order, with the run of rows each step hands on found by bisection, not row by row."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from operator import attrgetter

from .tickfiles import Row
from .ticks import Tick

_ts = attrgetter("ts")


def _tick_times(batch: list[Row]) -> list[float] | None:
    """Each row's tick time when every row is a tick and the times never go down (what
    a bisection needs), else None (then the rows are looked at one by one)."""
    try:
        times: list[float] = list(map(_ts, batch))
    except AttributeError:  # a bad row: it has no time of its own
        return None
    return times if times == sorted(times) else None


def merge_batches(streams: Iterable[Iterator[list[Row]]]) -> Iterator[list[Row]]:
    """The rows :func:`~monitor.tickfiles.merge_by_time` yields for the streams these
    lists of rows make (each list non-empty or skipped), in the same order, in lists.

    Each step hands on, from the stream whose head has the smallest time (the first on a
    tie), its head and the rows after it up to the next tick dated past the smallest time
    of the others (or at it, when that stream comes first): in a list whose times are
    sorted, one bisection; otherwise (a bad row, a time going back) row by row.
    """
    sources: list[Iterator[list[Row]]] = []
    batches: list[list[Row]] = []
    keys: list[list[float] | None] = []
    heads: list[int] = []  # per stream, its head's index in its list
    times: list[float] = []  # per stream, the newest tick time so far (0.0 before one)
    for stream in streams:
        for batch in stream:
            if batch:
                sources.append(stream)
                batches.append(batch)
                keys.append(_tick_times(batch))
                heads.append(0)
                first = batch[0]
                times.append(first.ts if isinstance(first, Tick) else 0.0)
                break
    while len(batches) > 1:
        best = 0
        for i in range(1, len(batches)):
            if times[i] < times[best]:
                best = i
        rival = 1 if best == 0 else 0  # the first of the others with the smallest time
        for i in range(rival + 1, len(batches)):
            if i != best and times[i] < times[rival]:
                rival = i
        limit = times[rival]
        at = rival < best  # a tick at the limit stops this stream too
        batch, sorted_times, start = batches[best], keys[best], heads[best]
        low = start + 1  # the head goes on whatever its time
        while True:
            end = stop = len(batch)
            stop_ts = limit
            if sorted_times is not None:
                stop = (bisect_left if at else bisect_right)(sorted_times, limit, low)
                if stop < end:
                    stop_ts = sorted_times[stop]
            else:
                for i in range(low, end):
                    row = batch[i]
                    if isinstance(row, Tick):
                        ts = row.ts
                        if ts > limit or (at and ts == limit):
                            stop, stop_ts = i, ts
                            break
            if stop < end:
                yield batch[start:stop]
                heads[best], times[best] = stop, stop_ts
                break
            yield batch if start == 0 else batch[start:]
            for batch in sources[best]:
                if batch:
                    break
            else:  # the stream is done
                del sources[best], batches[best], keys[best], heads[best], times[best]
                break
            sorted_times = _tick_times(batch)
            batches[best], keys[best] = batch, sorted_times
            start = low = 0
    if batches:
        yield batches[0][heads[0]:]
        yield from sources[0]
