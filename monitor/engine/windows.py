"""Rolling windows in event time, as a ring of fixed-width buckets.

Memory is bounded by the longest window (60 one-minute buckets by default), whatever the
tick rate; a tick costs O(1) amortised: the price that held since the previous tick is
spread over the (at most ring-size) buckets it covered. The ring always holds exactly the
buckets ``head - size + 1 .. head`` (empty ones zeroed), so a window is a contiguous slice
and its sums run in C (``sum``/``min``/``max`` over column slices), not in a Python loop.

The price between two ticks is taken to be the earlier tick's price (a step function), so
every time-based figure is time-weighted: a burst of ticks at one price counts no more than
one tick holding that price for as long.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from .readings import NEVER, Flags, column, count_beyond, read_fields
from .ringfields import _COV, _DEV, _EMPTY, _HIGH, _LOW, _MAX, _MIN, _R2, _TICKS
from .ringfields import COV as COV  # the field names, re-exported for the readers
from .ringfields import DEV as DEV
from .ringfields import HIGH as HIGH
from .ringfields import LOW as LOW
from .ringfields import MAX as MAX
from .ringfields import MIN as MIN
from .ringfields import R2 as R2
from .ringfields import TICKS as TICKS
from .saved import WindowState as WindowState  # re-exported: its old home


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


class Windows:
    """Per-token buckets of deviation, persistence and squared changes.

    ``dev`` is the signed relative deviation ``(price - peg) / peg``; persistence counts
    time spent *below* peg by more than ``low``/``high`` (a premium is not a loss of peg).
    """

    __slots__ = (
        "_c_cov", "_c_dev", "_c_high", "_c_low", "_c_max", "_c_min", "_c_r2", "_c_ticks",
        "_decay", "_decay_dt", "_f", "_flags", "_neg_high", "_neg_low", "_open", "_open_end",
        "_open_slot", "base_s", "base_tau", "base_ts", "bucket", "head", "high", "high_b",
        "last_dev", "last_price_ts", "low", "low_b", "size",
    )

    def __init__(self, bucket_seconds: int, size: int, low: float, high: float,
                 baseline_seconds: float) -> None:
        self.bucket = float(bucket_seconds)
        self.size = size
        self.low = low
        self.high = high
        # The lines as the per-tick compares use them (negating is exact: same compares).
        self._neg_low = -low
        self._neg_high = -high
        self.base_tau = float(baseline_seconds)
        self._f = [column([empty] * size) for empty in _EMPTY]
        self._columns()
        #: Derived from the ring, never saved (rebuilt on demand after ``load``).
        self._flags: dict[tuple[tuple[float, ...], bool], Flags] = {}
        #: The newest bucket that ever had time below the low / high line added: a ring
        #: slice of later buckets only is all zeros in that column (a refresh then skips
        #: summing it). Derived, never saved (worked out again on ``load``).
        self.low_b = NEVER
        self.high_b = NEVER
        self.head: int | None = None  # newest bucket index held by the ring
        self.last_price_ts: float | None = None
        self.last_dev: float | None = None
        # Exponentially decayed sum of squared deviation changes: the volatility baseline.
        self.base_s = 0.0
        self.base_ts: float | None = None
        #: The head bucket, while the last price lies in it (then ``last_dev`` is set and
        #: ``base_ts == last_price_ts``); else NEVER. Only ``add_price`` sets it, at the
        #: end of its general path; ``load`` resets it. A tick in this bucket after the
        #: last price takes the short path (docs/performance.md, eleventh pass), one in the
        #: next bucket ``_next_bucket`` (twelfth pass). Its end time (-inf while shut: no
        #: time is before it) and its ring slot are kept with it.
        self._open = NEVER
        self._open_end = -math.inf
        self._open_slot = 0
        #: ``math.exp(-_decay_dt / base_tau)``: the baseline's decay over the last interval
        #: held, kept for the next one of the same length (a steady tick rate).
        self._decay_dt = math.nan  # equal to no interval
        self._decay = 1.0

    def _columns(self) -> None:
        """Each column of ``_f`` under a name of its own as well (the per-tick paths: one
        attribute read instead of ``f[_DEV]``'s local, global and item reads). Called
        wherever ``_f`` is set."""
        (self._c_dev, self._c_cov, self._c_low, self._c_high, self._c_r2, self._c_ticks,
         self._c_min, self._c_max) = self._f

    # -- updates ---------------------------------------------------------------------
    def _slot(self, b: int) -> int:
        """The ring slot of bucket ``b``, rolling the ring forward (zeroing) if needed."""
        head = self.head
        size = self.size
        if head is None or b > head:
            start = b - size + 1 if head is None or b - head >= size else head + 1
            # Each field emptied by name (this runs once per new bucket, i.e. per tick
            # of a token ticking once a bucket; a zip over the fields cost twice this).
            dev_dt, covered, low_s, high_s, r2, ticks, mn, mx = self._f
            for k in range(start, b + 1):
                s = k % size
                dev_dt[s] = 0.0
                covered[s] = 0.0
                low_s[s] = 0.0
                high_s[s] = 0.0
                r2[s] = 0.0
                ticks[s] = 0.0
                mn[s] = math.inf
                mx[s] = -math.inf
            self.head = b
        return b % size

    def add_price(self, ts: float, dev: float) -> None:
        """A new price observation at ``ts`` (ticks arrive in time order)."""
        last_dev = self.last_dev
        since = self.last_price_ts
        if since is not None and last_dev is not None and since < ts:
            end = self._open_end
            if ts < end:
                # The common case, for a token ticking more than once a bucket: the held
                # price and the new one both in the head bucket (so is all of [since, ts)).
                # ``ts < end`` is ``int(ts // bucket) == _open`` (``since`` lies in that
                # bucket and a floor division by a whole number of seconds is exact): no
                # bucket index, the slot kept. ``base_ts`` is ``since`` here (``_open``).
                slot = self._open_slot
                dt = ts - since
                self._c_dev[slot] += last_dev * dt
                self._c_cov[slot] += dt
                if last_dev < self._neg_low:
                    self._c_low[slot] += dt
                    b = self._open
                    if last_dev < self._neg_high:
                        self._c_high[slot] += dt
                        if b > self.high_b:
                            self.high_b = b
                    if b > self.low_b:
                        self.low_b = b
                elif last_dev < self._neg_high and self._open > self.high_b:
                    self.high_b = self._open
                # No min/max store for ``last_dev``: it is already within this bucket's
                # extremes (the call that took it wrote it into this bucket, the head then
                # as now; extremes only widen, and nothing empties the head while it is
                # the head).
                change = dev - last_dev
                r2 = change * change
                self._c_r2[slot] += r2
                # The decay then the change: the same two roundings as the general path.
                if dt != self._decay_dt:  # a token ticking at a steady rate: the same dt
                    self._decay_dt = dt
                    self._decay = math.exp(-dt / self.base_tau)
                self.base_s = self.base_s * self._decay + r2
                self.base_ts = ts
                self._c_ticks[slot] += 1.0
                if dev < self._c_min[slot]:
                    self._c_min[slot] = dev
                if dev > self._c_max[slot]:
                    self._c_max[slot] = dev
                self.last_price_ts = ts
                self.last_dev = dev
                return
            bucket = self.bucket
            if ts < end + bucket:
                self._next_bucket(ts, dev, since, last_dev, end, bucket)
                return
        f = self._f
        bucket = self.bucket
        new_b = int(ts // bucket)
        size = self.size
        if last_dev is not None and since is not None:
            if since < ts:  # tested first: the engine's case
                b = int(since // bucket)
                stop = (b + 1) * bucket
                head = self.head
                if ts <= stop and head is not None and b == head:
                    # A tick in the bucket of the one before it that the short path
                    # above did not take (on the bucket's end, or the first after a
                    # ``load``). An interval inside one bucket is shorter than the ring:
                    # no cut. The general loop below is inlined too: a call cost more.
                    slot = b % size
                    dt = ts - since
                    f[_DEV][slot] += last_dev * dt
                    f[_COV][slot] += dt
                    below_high = last_dev < -self.high
                    if last_dev < -self.low:
                        f[_LOW][slot] += dt
                        if below_high:
                            f[_HIGH][slot] += dt
                        if b > self.low_b:
                            self.low_b = b
                    if below_high and b > self.high_b:
                        self.high_b = b
                    # No min/max store: ``last_dev`` is already within this bucket's
                    # extremes. The call that took it wrote it into its bucket, ``b``
                    # (then the head: ticks come in time order); extremes only widen
                    # since, and nothing empties the head bucket while it is the head.
                else:  # [since, ts) from bucket ``b`` on, one pass per bucket
                    t = since
                    horizon = ts - size * bucket
                    if t < horizon:  # a gap longer than the ring: its newest stretch only
                        t = horizon
                        b = int(t // bucket)
                        stop = (b + 1) * bucket
                    below_low = last_dev < -self.low
                    below_high = last_dev < -self.high
                    while True:  # one pass per bucket covered
                        if stop > ts:
                            stop = ts
                        dt = stop - t
                        if head is not None and b <= head:
                            slot = b % size
                        else:  # rolling the ring forward
                            slot = self._slot(b)
                            head = b
                        f[_DEV][slot] += last_dev * dt
                        f[_COV][slot] += dt
                        if below_low:
                            f[_LOW][slot] += dt
                            if below_high:
                                f[_HIGH][slot] += dt
                        if last_dev < f[_MIN][slot]:
                            f[_MIN][slot] = last_dev
                        if last_dev > f[_MAX][slot]:
                            f[_MAX][slot] = last_dev
                        t = stop
                        if t >= ts:
                            break
                        b = int(t // bucket)
                        stop = (b + 1) * bucket
                    # ``b`` is the newest bucket written: time below the lines reached it.
                    if below_low and b > self.low_b:
                        self.low_b = b
                    if below_high and b > self.high_b:
                        self.high_b = b
            elif ts < since:
                self._flags.clear()  # out of order (never from the engine): rework them
        b = new_b
        head = self.head
        # The new price's bucket is the head now unless it came before the head (a tick
        # out of order, never from the engine): then the short path stays shut.
        if head is not None and b <= head:
            slot = b % size
            if b == head:
                self._open = b
                self._open_end = (b + 1) * bucket
            else:
                self._open = NEVER
                self._open_end = -math.inf
        else:
            slot = self._slot(b)
            self._open = b
            self._open_end = (b + 1) * bucket
        self._open_slot = slot
        if last_dev is not None:
            change = dev - last_dev
            r2 = change * change
            f[_R2][slot] += r2
            base_ts = self.base_ts  # the decay then the change: the same two roundings
            if base_ts is None:
                self.base_s += r2
            else:
                self.base_s = self.base_s * math.exp(-(ts - base_ts) / self.base_tau) + r2
        self.base_ts = ts
        f[_TICKS][slot] += 1.0
        if dev < f[_MIN][slot]:
            f[_MIN][slot] = dev
        if dev > f[_MAX][slot]:
            f[_MAX][slot] = dev
        self.last_price_ts = ts
        self.last_dev = dev

    def _next_bucket(self, ts: float, dev: float, since: float, last_dev: float,
                     end: float, bucket: float) -> None:
        """``add_price`` for a price in the bucket after the head when the held one lies in
        the head (``_open``): ``end <= ts < end + bucket``, ``end`` the head's end. A token
        ticking about once a bucket (every tick of a one-minute feed, a replay's 1m files
        exactly on the boundary) or crossing into the next one. The general path rolls the
        ring by one bucket (``_slot``: the new slot zeroed) and adds to it; here the new
        slot's columns are written once, as those additions to zero leave them (``0.0 +``
        where that can differ: -0.0), and with the same compares for the extremes."""
        b = self._open
        slot = self._open_slot
        dt = end - since  # [since, end) in the head bucket
        self._c_dev[slot] += last_dev * dt
        self._c_cov[slot] += dt
        below_low = last_dev < self._neg_low
        below_high = last_dev < self._neg_high
        if below_low:
            self._c_low[slot] += dt
            if below_high:
                self._c_high[slot] += dt
        # No min/max store for ``last_dev`` there (see ``add_price``'s short path).
        nb = b + 1
        new = nb % self.size
        if ts > end:  # [end, ts) in the new bucket: ``last_dev`` held there too
            dt = ts - end
            self._c_dev[new] = 0.0 + last_dev * dt
            self._c_cov[new] = dt  # > 0: ``0.0 + dt`` is ``dt``
            self._c_low[new] = dt if below_low else 0.0
            self._c_high[new] = dt if below_low and below_high else 0.0
            # The empty slot's extremes (inf, -inf) against ``last_dev``.
            low = last_dev if last_dev < math.inf else math.inf
            high = last_dev if last_dev > -math.inf else -math.inf
            written = nb  # the newest bucket with time held in it
        else:  # on the boundary: the new bucket holds only the new price
            self._c_dev[new] = 0.0
            self._c_cov[new] = 0.0
            self._c_low[new] = 0.0
            self._c_high[new] = 0.0
            low = math.inf
            high = -math.inf
            written = b
        if below_low and written > self.low_b:
            self.low_b = written
        if below_high and written > self.high_b:
            self.high_b = written
        self.head = nb
        self._open = nb
        self._open_end = end + bucket  # (nb + 1) * bucket: both exact
        self._open_slot = new
        change = dev - last_dev
        r2 = change * change
        self._c_r2[new] = 0.0 + r2
        dt = ts - since  # ``base_ts`` is ``since`` (``_open``)
        if dt != self._decay_dt:
            self._decay_dt = dt
            self._decay = math.exp(-dt / self.base_tau)
        self.base_s = self.base_s * self._decay + r2
        self.base_ts = ts
        self._c_ticks[new] = 1.0  # 0.0 + 1.0
        self._c_min[new] = dev if dev < low else low
        self._c_max[new] = dev if dev > high else high
        self.last_price_ts = ts
        self.last_dev = dev

    # -- queries (read-only: the open interval since the last tick is added on the fly) --
    def _slices(self, lo: int, hi: int) -> list[slice]:
        """Ring slices covering buckets lo..hi (inclusive, within the ring)."""
        a, b = lo % self.size, hi % self.size
        return [slice(a, b + 1)] if a <= b else [slice(a, None), slice(0, b + 1)]

    def window(self, now: float, seconds: float) -> Sums:
        """Sums over [now - seconds, now), bucket-aligned (a refresh at a bucket boundary
        sees exactly that interval), including the still-open interval since the last tick."""
        bucket = self.bucket
        end_b = int(now // bucket)
        if now == end_b * bucket:
            end_b -= 1  # the bucket starting at `now` holds nothing before `now`
        first_b = math.ceil((now - seconds) / bucket)
        first_b = max(first_b, end_b - self.size + 1)
        acc = list(_EMPTY)
        head = self.head
        if head is not None:
            lo, hi = max(first_b, head - self.size + 1), min(end_b, head)
            if lo <= hi:
                f = self._f
                for sl in self._slices(lo, hi):
                    for i in (_DEV, _COV, _LOW, _HIGH, _R2, _TICKS):
                        acc[i] += sum(f[i][sl])
                    acc[_MIN] = min(acc[_MIN], min(f[_MIN][sl]))
                    acc[_MAX] = max(acc[_MAX], max(f[_MAX][sl]))
        dev = self.last_dev
        if dev is not None and self.last_price_ts is not None:
            start = max(self.last_price_ts, first_b * bucket)
            if now > start:
                dt = now - start
                acc[_DEV] += dev * dt
                acc[_COV] += dt
                if dev < -self.low:
                    acc[_LOW] += dt
                    if dev < -self.high:
                        acc[_HIGH] += dt
                acc[_MIN] = min(acc[_MIN], dev)
                acc[_MAX] = max(acc[_MAX], dev)
        return Sums(*acc)

    def buckets_below(self, now: float, seconds: float, level: float) -> int:
        """Buckets of [now - seconds, now) in which the price was known and *every* price
        held was more than ``level`` below peg (the highest deviation of the bucket is
        below ``-level``). Conservative on purpose: a bucket that touched the line does
        not count, so a hard floor built on this never fires on a brief dip."""
        return sum(1 for x in self.bucket_extremes(now, seconds, above=False) if x < -level)

    def buckets_above(self, now: float, seconds: float, level: float) -> int:
        """Buckets in which every price held was more than ``level`` *above* peg."""
        return sum(1 for x in self.bucket_extremes(now, seconds, above=True) if x > level)

    def bucket_extremes(self, now: float, seconds: float, *, above: bool) -> list[float]:
        """Per bucket of [now - seconds, now) in which the price was known, the extreme
        that must clear a line for the bucket to count as wholly beyond it: the lowest
        deviation held (``above``) or the highest (below). One pass serves several lines
        (the hard floors ask for three)."""
        bucket = self.bucket
        end_b = int(now // bucket)
        if now == end_b * bucket:
            end_b -= 1
        first_b = max(math.ceil((now - seconds) / bucket), end_b - self.size + 1)
        if first_b > end_b:
            return []
        head = self.head
        dev, since = self.last_dev, self.last_price_ts
        # Buckets from the one holding the last tick onwards also hold ``dev`` (the step
        # function keeps the last price until the next tick), which the ring lacks yet.
        held_from = int(since // bucket) if since is not None and dev is not None \
            else end_b + 1
        f_ext = self._f[_MIN] if above else self._f[_MAX]
        f_cov = self._f[_COV]
        out: list[float] = []
        # Ring buckets before the held stretch: those with a known price.
        if head is not None:
            lo, hi = max(first_b, head - self.size + 1), min(end_b, head, held_from - 1)
            if lo <= hi:
                for sl in self._slices(lo, hi):
                    out += [x for c, x in zip(f_cov[sl], f_ext[sl], strict=True) if c > 0]
        # The held stretch: always covered; its extreme also counts ``dev`` (an empty
        # slot's extreme is ±inf, so then it is ``dev`` alone).
        lo = max(first_b, held_from)
        if lo <= end_b and dev is not None:
            pick = min if above else max
            for b in range(lo, end_b + 1):
                if head is not None and head - self.size < b <= head:
                    out.append(pick(f_ext[b % self.size], dev))
                else:
                    out.append(dev)
        return out

    # -- the same queries, only what a refresh reads (monitor/engine/readings.py) -------
    def fields(self, now: float, seconds: float, which: Sequence[int]) -> list[float]:
        """``[window(now, seconds)[i] for i in which]``, computing only those fields."""
        return read_fields(self, now, ((seconds, which),))

    def reads(self, now: float, spec: Sequence[tuple[float, Sequence[int]]]) -> list[float]:
        """:meth:`fields` of several windows ending at ``now``, in one list."""
        return read_fields(self, now, spec)

    def count_beyond(self, now: float, seconds: float, lines: tuple[float, ...], *,
                     above: bool) -> list[int]:
        """Per line, how many of ``bucket_extremes(now, seconds, above=above)`` are
        beyond it (``> line`` when ``above``, else ``< line``)."""
        return count_beyond(self, now, seconds, lines, above=above)

    def baseline_rate(self, now: float) -> float:
        """Baseline variance of deviation changes per second, decayed to ``now``."""
        if self.base_ts is None:
            return 0.0
        decayed = self.base_s * math.exp(-max(0.0, now - self.base_ts) / self.base_tau)
        return decayed / self.base_tau

    # -- persistence -----------------------------------------------------------------
    def export(self) -> WindowState:
        return WindowState(
            head=self.head, values=[list(f) for f in self._f],
            last_price_ts=self.last_price_ts, last_dev=self.last_dev,
            base_s=self.base_s, base_ts=self.base_ts,
        )

    def load(self, state: WindowState) -> None:
        sizes = {len(v) for v in state.values}
        if len(sizes) != 1 or not 0 < (old := sizes.pop()) <= self.size:
            raise ValueError("window state was saved with a larger ring")
        self.head = state.head
        self._open = NEVER  # the general path first (it sets the mark again)
        self._open_end = -math.inf
        self._flags.clear()
        if old == self.size:
            self._f = [column(v) for v in state.values]
            self._columns()
        else:
            # A smaller ring (saved before the ring grew by one bucket): re-lay its
            # buckets on this ring's slots; the extra older slots stay empty.
            self._f = [column([empty] * self.size) for empty in _EMPTY]
            self._columns()
            if state.head is not None:
                for b in range(state.head - old + 1, state.head + 1):
                    for field, values in zip(self._f, state.values, strict=True):
                        field[b % self.size] = values[b % old]
        self.last_price_ts = state.last_price_ts
        self.last_dev = state.last_dev
        self.base_s = state.base_s
        self.base_ts = state.base_ts
        self.low_b = self.high_b = NEVER
        if self.head is not None:
            for b in range(self.head - self.size + 1, self.head + 1):
                if self._f[_LOW][b % self.size] != 0.0:
                    self.low_b = b
                if self._f[_HIGH][b % self.size] != 0.0:
                    self.high_b = b
