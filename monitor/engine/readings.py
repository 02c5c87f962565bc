"""What a refresh reads from the windows: only the fields it uses, and counts of whole
buckets beyond a line, giving the very floats and counts of the plain queries.

A refresh reads a handful of fields of four windows and counts whole buckets beyond
four lines; computing every field of every window (``Windows.window``) and listing every
bucket's extreme (``Windows.bucket_extremes``) was most of its cost. Each field here is
summed over the very same ring slices in the very same order as ``window`` sums it
(float addition is not associative, so a running sum would move the last bits);
counts are integers, so they are kept incrementally (:class:`Flags`). ``window`` and
``bucket_extremes`` stay as the plain reference (tests/engine/test_windows_fast.py).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

from .ringfields import _COV, _HIGH, _LOW, _MAX, _MIN

if TYPE_CHECKING:  # these read a Windows' ring directly (its companion module)
    from .windows import Windows

#: A bucket index before every real one (``Windows.low_b``/``high_b`` before any write).
NEVER: Final = -(1 << 60)


def column(values: Iterable[float]) -> list[float]:
    """A ring column: a list of floats. ``sum``, ``min`` and ``max`` over a list slice
    see the same floats in the same order as over the ``array``/memoryview it replaced
    (so the very same results), without making a float object per item read (a refresh's
    reads cost about half as much), and storing an item is a pointer store. Cost: a
    written cell is a float object (24 bytes) instead of 8, ~10 KB more per token."""
    return list(values)  # floats already: the ring's empties, or a saved state's


class Flags:
    """Per ring slot and per line, 1 when that final bucket was covered and its extreme
    beyond the line, else 0: valid for the buckets ``lo..upto`` still in the ring."""

    __slots__ = ("columns", "lo", "pairs", "upto")

    def __init__(self, lines: tuple[float, ...], size: int) -> None:
        # Byte strings: flags are counted by ``column.count(1, a, b)``, in C, no slice.
        self.columns = [bytearray(size) for _ in lines]
        #: Each line with its column (built once: it was a zip per refresh).
        self.pairs = tuple(zip(self.columns, lines, strict=True))
        self.lo = 0
        self.upto: int | None = None

    def cover(self, lo: int, hi: int, ext: list[float], cov: list[float],
              above: bool) -> None:
        """Make the flags of final buckets ``lo..hi`` valid (working out only the new)."""
        if self.upto is None or lo < self.lo or self.upto < lo - 1:
            start, self.lo = lo, lo
        else:
            start = self.upto + 1
        size = len(ext)
        pairs = self.pairs
        for k in range(start, hi + 1):
            slot = k % size
            x = ext[slot]
            if not cov[slot] > 0:
                for column, _ in pairs:
                    column[slot] = 0
            elif above:
                for column, line in pairs:
                    column[slot] = 1 if x > line else 0
            else:
                for column, line in pairs:
                    column[slot] = 1 if x < line else 0
        if self.upto is None or start == lo or hi > self.upto:
            self.upto = hi


def read_fields(w: Windows, now: float,
                spec: Sequence[tuple[float, Sequence[int]]]) -> list[float]:
    """For each ``(seconds, fields)`` of ``spec``, ``[w.window(now, seconds)[i] for i in
    fields]``, one after the other in one list (a refresh's reads in one call)."""
    bucket = w.bucket
    size = w.size
    end_b = int(now // bucket)
    if now == end_b * bucket:
        end_b -= 1
    oldest = end_b - size + 1
    head = w.head
    dev = w.last_dev
    since = w.last_price_ts if dev is not None else None
    w.sync()  # the open bucket, added up apart, into the ring first
    f = w._f
    below_low = dev is not None and dev < -w.low
    below_high = below_low and dev is not None and dev < -w.high
    low_b, high_b = w.low_b, w.high_b
    out: list[float] = []
    append = out.append
    for seconds, which in spec:
        first_b = math.ceil((now - seconds) / bucket)
        if first_b < oldest:
            first_b = oldest
        a = b = -1
        lo = NEVER
        if head is not None:
            lo = first_b if first_b > head - size + 1 else head - size + 1
            hi = end_b if end_b < head else head
            if lo <= hi:
                a, b = lo % size, hi % size
        dt = 0.0
        if since is not None:
            start = first_b * bucket
            if since > start:
                start = since
            if now > start:
                dt = now - start
        held = dt != 0.0 and dev is not None
        # What the held stretch adds to each additive field (0.0 when nothing is held:
        # adding 0.0 changes no sum, as none is -0.0: ``sum`` starts from +0).
        add = _NO_ADD if not held or dev is None else (
            dev * dt, dt, dt if below_low else 0.0, dt if below_high else 0.0, 0.0, 0.0)
        # The slice(s) of the window, written where a field reads them (``f[i][a:b + 1]``:
        # no ``slice`` object made per window, a builtin call, most windows reading none
        # or one field's). A sum is ``sum(slice, 0.0)``: from a float 0.0, as ``window``
        # sums (the same additions as the builtin from int 0 for a non-empty slice, and a
        # float for an empty one, which the compiled build needs), each slice's sum from
        # zero, then the two added.
        wrap = a > b
        for i in which:
            if i < _MIN:
                # Nothing below the line since before the slice: every cell is 0.0 (these
                # columns only ever get positive seconds added), and so is their sum.
                if a < 0 or (i == _LOW and low_b < lo) or (i == _HIGH and high_b < lo):
                    append(0.0 + add[i])
                elif wrap:
                    column = f[i]
                    if _NATIVE_SUM:
                        append(_total(column, a, size - 1) + _total(column, 0, b) + add[i])
                    else:
                        append(sum(column[a:], 0.0) + sum(column[:b + 1], 0.0) + add[i])
                elif a == b:  # one bucket (the 1-minute TWAP): ``sum`` of it is 0.0 + it
                    append(0.0 + f[i][a] + add[i])
                else:
                    append((_total(f[i], a, b) if _NATIVE_SUM else sum(f[i][a:b + 1], 0.0))
                           + add[i])
            elif i == _MIN:
                # ``min(acc, x)`` written as the builtin compares (the first of equal
                # values wins): a two-argument builtin call iterates over a tuple.
                acc = math.inf
                if a < 0:
                    pass
                elif wrap:
                    column = f[i]
                    x = _lowest(column, a, size - 1) if _NATIVE else min(column[a:])
                    if x < acc:
                        acc = x
                    x = _lowest(column, 0, b) if _NATIVE else min(column[:b + 1])
                    if x < acc:
                        acc = x
                else:
                    x = _lowest(f[i], a, b) if _NATIVE else min(f[i][a:b + 1])
                    if x < acc:
                        acc = x
                if held and dev is not None and dev < acc:
                    acc = dev
                append(acc)
            else:
                acc = -math.inf
                if a < 0:
                    pass
                elif wrap:
                    column = f[i]
                    x = _highest(column, a, size - 1) if _NATIVE else max(column[a:])
                    if x > acc:
                        acc = x
                    x = _highest(column, 0, b) if _NATIVE else max(column[:b + 1])
                    if x > acc:
                        acc = x
                else:
                    x = _highest(f[i], a, b) if _NATIVE else max(f[i][a:b + 1])
                    if x > acc:
                        acc = x
                if held and dev is not None and dev > acc:
                    acc = dev
                append(acc)
    return out


#: Compiled (mypyc: the module is an extension, not a ``.py`` file), ``read_fields`` takes
#: a window's extremes with :func:`_lowest`/:func:`_highest`, native loops over the ring
#: column (unboxed compares, no slice copy: ~1/10 of the builtins' cost a cell); run by
#: the interpreter, a Python loop costs ~3 times the builtins over a slice, so it keeps
#: them. The same compares in the same order: the very same float either way.
_NATIVE: Final = not __file__.endswith(".py")
#: Sums the same way (:func:`_total`), only on CPython 3.11: from 3.12 a float ``sum``
#: compensates its rounding (a plain loop would not give its floats), so there both
#: builds keep the builtin.
_NATIVE_SUM: Final = _NATIVE and sys.version_info < (3, 12)


def _total(column: list[float], a: int, b: int) -> float:
    """``sum(column[a:b + 1], 0.0)`` as CPython 3.11's ``sum`` adds floats: from 0.0,
    one addition per cell, in order."""
    acc = 0.0
    for k in range(a, b + 1):
        acc += column[k]
    return acc


def _lowest(column: list[float], a: int, b: int) -> float:
    """``min(column[a:b + 1])`` (``a <= b``), compared as the builtin does: from the first
    cell, a later one taken only when lower (the first of equal values wins; a NaN
    neither taken nor left once held)."""
    acc = column[a]
    for k in range(a + 1, b + 1):
        x = column[k]
        if x < acc:
            acc = x
    return acc


def _highest(column: list[float], a: int, b: int) -> float:
    """``max(column[a:b + 1])`` (``a <= b``), compared as the builtin does."""
    acc = column[a]
    for k in range(a + 1, b + 1):
        x = column[k]
        if x > acc:
            acc = x
    return acc


#: ``read_fields``' additions when no price is held over a window.
_NO_ADD: Final = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def count_beyond(w: Windows, now: float, seconds: float, lines: tuple[float, ...], *,
                 above: bool) -> list[int]:
    """Per line, how many of ``bucket_extremes(now, seconds, above=above)`` are
    beyond it: ``> line`` when ``above``, else ``< line`` (the same counts as
    ``buckets_above``/``buckets_below`` with ``line = level``/``-level``).

    A bucket before the one holding the last tick is final (ticks come in time
    order, so nothing is written there again): whether it is beyond each line is
    worked out once, kept per ring slot (:class:`_Flags`), and a refresh adds up
    flags. Only the buckets from the last tick's on are looked at each time."""
    w.sync()  # the open bucket, added up apart, into the ring first
    bucket = w.bucket
    size = w.size
    end_b = int(now // bucket)
    if now == end_b * bucket:
        end_b -= 1
    first_b = math.ceil((now - seconds) / bucket)
    if first_b < end_b - size + 1:
        first_b = end_b - size + 1
    counts = [0] * len(lines)
    if first_b > end_b:
        return counts
    head = w.head
    dev, since = w.last_dev, w.last_price_ts
    held_from = int(since // bucket) if since is not None and dev is not None \
        else end_b + 1
    f_ext = w._f[_MIN] if above else w._f[_MAX]
    if head is not None:
        lo = first_b if first_b > head - size + 1 else head - size + 1
        hi = end_b if end_b < head else head
        if hi > held_from - 1:
            hi = held_from - 1
        # Below lines at or under the low persistence line: a covered bucket whose highest
        # price is below such a line had all its held time below the low line, so it was
        # written into the low column (``low_b``). None since before ``lo``: none counts.
        if lo <= hi and not above and w.low_b < lo and lines and max(lines) <= -w.low:
            hi = lo - 1
        if lo <= hi:
            flags = w._flags.get((lines, above))
            if flags is None:
                flags = w._flags[(lines, above)] = Flags(lines, size)
            flags.cover(lo, hi, f_ext, w._f[_COV], above)
            a, b = lo % size, hi % size
            for n, column in enumerate(flags.columns):  # slots a..b, wrapping past the end
                counts[n] = column.count(1, a, b + 1) if a <= b \
                    else column.count(1, a) + column.count(1, 0, b + 1)
    # The held stretch: ring buckets take the extreme with ``dev``; the buckets past
    # the ring's head hold ``dev`` alone.
    lo = first_b if first_b > held_from else held_from
    if lo <= end_b and dev is not None:
        ring_hi = lo - 1 if head is None else min(end_b, head)
        held: list[float] = []
        lone = 0
        for k in range(lo, ring_hi + 1):
            if head is not None and head - size < k:  # at most one bucket, normally
                x = f_ext[k % size]
                held.append((x if x < dev else dev) if above else (x if x > dev else dev))
            else:
                lone += 1
        lone += end_b - max(lo, ring_hi + 1) + 1
        n = 0
        for line in lines:
            if above:
                count = lone if dev > line else 0
                for x in held:
                    if x > line:
                        count += 1
            else:
                count = lone if dev < line else 0
                for x in held:
                    if x < line:
                        count += 1
            counts[n] += count
            n += 1
    return counts
