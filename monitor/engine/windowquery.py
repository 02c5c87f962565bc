"""The plain window queries: every field of a window (``Windows.window``) and every
bucket's extreme (``Windows.bucket_extremes``), worked out directly from the ring.

A refresh does not use these (``readings.py`` reads only the fields it needs and keeps
its counts incrementally, giving the very same floats and counts); they are the
reference those readers are tested against (tests/engine/test_windows_fast.py) and what
other callers ask of a ring.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

from .ringfields import _COV, _DEV, _EMPTY, _HIGH, _LOW, _MAX, _MIN, _R2, _TICKS

if TYPE_CHECKING:  # these read a Windows' ring directly (its companion module)
    from .windows import Windows


class Sums(NamedTuple):
    """Time-weighted sums over one window."""

    dev_dt: float    # integral of deviation over time (divide by ``covered`` for the mean)
    covered: float   # seconds with a known price
    low_s: float     # seconds below peg by more than ``low``
    high_s: float    # seconds below peg by more than ``high``
    r2: float        # sum of squared deviation changes (realised variance)
    ticks: float
    min_dev: float
    max_dev: float


def ring_slices(w: Windows, lo: int, hi: int) -> list[slice]:
    """Ring slices covering buckets lo..hi (inclusive, within the ring)."""
    a, b = lo % w.size, hi % w.size
    return [slice(a, b + 1)] if a <= b else [slice(a, None), slice(0, b + 1)]

def window_sums(w: Windows, now: float, seconds: float) -> Sums:
    """Sums over [now - seconds, now), bucket-aligned (a refresh at a bucket boundary
    sees exactly that interval), including the still-open interval since the last tick."""
    w.sync()  # the open bucket, added up apart, into the ring first
    bucket = w.bucket
    end_b = int(now // bucket)
    if now == end_b * bucket:
        end_b -= 1  # the bucket starting at `now` holds nothing before `now`
    first_b = math.ceil((now - seconds) / bucket)
    first_b = max(first_b, end_b - w.size + 1)
    acc = list(_EMPTY)
    head = w.head
    if head is not None:
        lo, hi = max(first_b, head - w.size + 1), min(end_b, head)
        if lo <= hi:
            f = w._f
            for sl in ring_slices(w, lo, hi):
                for i in (_DEV, _COV, _LOW, _HIGH, _R2, _TICKS):
                    acc[i] += sum(f[i][sl])
                acc[_MIN] = min(acc[_MIN], min(f[_MIN][sl]))
                acc[_MAX] = max(acc[_MAX], max(f[_MAX][sl]))
    dev = w.last_dev
    if dev is not None and w.last_price_ts is not None:
        start = max(w.last_price_ts, first_b * bucket)
        if now > start:
            dt = now - start
            acc[_DEV] += dev * dt
            acc[_COV] += dt
            if dev < -w.low:
                acc[_LOW] += dt
                if dev < -w.high:
                    acc[_HIGH] += dt
            acc[_MIN] = min(acc[_MIN], dev)
            acc[_MAX] = max(acc[_MAX], dev)
    return Sums(*acc)

def bucket_extremes(w: Windows, now: float, seconds: float, above: bool) -> list[float]:
    """Per bucket of [now - seconds, now) in which the price was known, the extreme
    that must clear a line for the bucket to count as wholly beyond it: the lowest
    deviation held (``above``) or the highest (below). One pass serves several lines
    (the hard floors ask for three)."""
    w.sync()  # the open bucket, added up apart, into the ring first
    bucket = w.bucket
    end_b = int(now // bucket)
    if now == end_b * bucket:
        end_b -= 1
    first_b = max(math.ceil((now - seconds) / bucket), end_b - w.size + 1)
    if first_b > end_b:
        return []
    head = w.head
    dev, since = w.last_dev, w.last_price_ts
    # Buckets from the one holding the last tick onwards also hold ``dev`` (the step
    # function keeps the last price until the next tick), which the ring lacks yet.
    held_from = int(since // bucket) if since is not None and dev is not None \
        else end_b + 1
    f_ext = w._f[_MIN] if above else w._f[_MAX]
    f_cov = w._f[_COV]
    out: list[float] = []
    # Ring buckets before the held stretch: those with a known price.
    if head is not None:
        lo, hi = max(first_b, head - w.size + 1), min(end_b, head, held_from - 1)
        if lo <= hi:
            for sl in ring_slices(w, lo, hi):
                out += [x for c, x in zip(f_cov[sl], f_ext[sl], strict=True) if c > 0]
    # The held stretch: always covered; its extreme also counts ``dev`` (an empty
    # slot's extreme is ±inf, so then it is ``dev`` alone).
    lo = max(first_b, held_from)
    if lo <= end_b and dev is not None:
        pick = min if above else max
        for b in range(lo, end_b + 1):
            if head is not None and head - w.size < b <= head:
                out.append(pick(f_ext[b % w.size], dev))
            else:
                out.append(dev)
    return out
