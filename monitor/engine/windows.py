"""Rolling windows in event time, as a ring of fixed-width buckets.

Memory is bounded by the longest window (60 one-minute buckets by default), whatever the
tick rate; a tick costs O(1) amortised: the price that held since the previous tick is
spread over the (at most ring-size) buckets it covered. The ring always holds exactly the
buckets ``head - size + 1 .. head`` (empty ones zeroed), so a window is a contiguous slice
and its sums run in C (``sum``/``min``/``max`` over column slices), not in a Python loop.

While ticks land in the newest bucket, its fields are added up in scalar attributes and
written to its ring slot (``Windows.sync``) before anything reads or rolls the ring: every
reader of ``_f`` or a ``_c_*`` column calls ``sync`` first.

The price between two ticks is taken to be the earlier tick's price (a step function), so
every time-based figure is time-weighted: a burst of ticks at one price counts no more than
one tick holding that price for as long.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .readings import NEVER, Flags, column, count_beyond, read_fields
from .ringfields import _EMPTY, _HIGH, _LOW
from .ringfields import COV as COV  # the field names, re-exported for the readers
from .ringfields import DEV as DEV
from .ringfields import HIGH as HIGH
from .ringfields import LOW as LOW
from .ringfields import MAX as MAX
from .ringfields import MIN as MIN
from .ringfields import R2 as R2
from .ringfields import TICKS as TICKS
from .ringroll import add_general
from .saved import WindowState as WindowState  # re-exported: its old home
from .windowquery import Sums as Sums  # re-exported: its old home
from .windowquery import bucket_extremes, window_sums


class Windows:
    """Per-token buckets of deviation, persistence and squared changes.

    ``dev`` is the signed relative deviation ``(price - peg) / peg``; persistence counts
    time spent *below* peg by more than ``low``/``high`` (a premium is not a loss of peg).
    """

    __slots__ = (
        "_c_cov", "_c_dev", "_c_high", "_c_low", "_c_max", "_c_min", "_c_r2", "_c_ticks",
        "_decay", "_decay_dt", "_f", "_flags", "_h_cov", "_h_dev", "_h_dirty", "_h_high",
        "_h_low", "_h_max", "_h_min", "_h_r2", "_h_ticks", "_neg_high", "_neg_low",
        "_next_end", "_open", "_open_end", "_open_slot", "base_s", "base_tau", "base_ts",
        "bucket", "head", "high", "high_b", "last_dev", "last_price_ts", "low", "low_b",
        "size",
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
        #: next bucket the path after it (twelfth pass). Its end time (-inf while shut: no
        #: time is before it) and its ring slot are kept with it.
        self._open = NEVER
        self._open_end = -math.inf
        #: ``_open_end + bucket``: the end of the bucket after the head (-inf while shut).
        self._next_end = -math.inf
        self._open_slot = 0
        #: ``math.exp(-_decay_dt / base_tau)``: the baseline's decay over the last interval
        #: held, kept for the next one of the same length (a steady tick rate).
        self._decay_dt = math.nan  # equal to no interval
        self._decay = 1.0
        #: The open bucket's fields while the short path adds to them (``_h_dirty``: its
        #: ring slot is behind them until ``sync``); read from the slot when it starts.
        self._h_dirty = False
        self._h_dev = self._h_cov = self._h_low = self._h_high = 0.0
        self._h_r2 = self._h_ticks = 0.0
        self._h_min = math.inf
        self._h_max = -math.inf

    def _columns(self) -> None:
        """Each column of ``_f`` under a name of its own as well (the per-tick paths: one
        attribute read instead of ``f[_DEV]``'s local, global and item reads). Called
        wherever ``_f`` is set."""
        (self._c_dev, self._c_cov, self._c_low, self._c_high, self._c_r2, self._c_ticks,
         self._c_min, self._c_max) = self._f

    # -- the open bucket's fields ---------------------------------------------------
    def _take_head(self) -> None:
        """Start adding up the open bucket in ``_h_*``: its slot's fields as they are."""
        slot = self._open_slot
        self._h_dev = self._c_dev[slot]
        self._h_cov = self._c_cov[slot]
        self._h_low = self._c_low[slot]
        self._h_high = self._c_high[slot]
        self._h_r2 = self._c_r2[slot]
        self._h_ticks = self._c_ticks[slot]
        self._h_min = self._c_min[slot]
        self._h_max = self._c_max[slot]
        self._h_dirty = True

    def sync(self) -> None:
        """Write the open bucket's fields to its ring slot. Every reader of the ring calls
        this first (``_f`` and the ``_c_*`` columns are behind while ``_h_dirty``)."""
        if self._h_dirty:
            slot = self._open_slot
            self._c_dev[slot] = self._h_dev
            self._c_cov[slot] = self._h_cov
            self._c_low[slot] = self._h_low
            self._c_high[slot] = self._h_high
            self._c_r2[slot] = self._h_r2
            self._c_ticks[slot] = self._h_ticks
            self._c_min[slot] = self._h_min
            self._c_max[slot] = self._h_max
            self._h_dirty = False

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
                # The head bucket's fields are added up in ``_h_*`` (``sync`` writes
                # them to its ring slot before anything reads or rolls the ring): one
                # object touched per tick instead of six columns and their boxed cells
                # (docs/performance.md, eighteenth pass). The same additions, in the same
                # order, on the same values: the very same floats.
                if not self._h_dirty:
                    self._take_head()
                dt = ts - since
                self._h_dev += last_dev * dt
                self._h_cov += dt
                if last_dev < self._neg_low:
                    self._h_low += dt
                    b = self._open
                    if last_dev < self._neg_high:
                        self._h_high += dt
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
                self._h_r2 += r2
                # The decay then the change: the same two roundings as the general path.
                if dt != self._decay_dt:  # a token ticking at a steady rate: the same dt
                    self._decay_dt = dt
                    self._decay = math.exp(-dt / self.base_tau)
                self.base_s = self.base_s * self._decay + r2
                self.base_ts = ts
                self._h_ticks += 1.0
                if dev < self._h_min:
                    self._h_min = dev
                if dev > self._h_max:
                    self._h_max = dev
                self.last_price_ts = ts
                self.last_dev = dev
                return
            if self._h_dirty:
                self.sync()
            if ts < self._next_end:
                # The bucket after the head (``end <= ts < end + bucket``): a token ticking
                # about once a bucket (every tick of a one-minute feed, a replay's 1m files
                # exactly on the boundary) or crossing into the next one. Inline, not a
                # method (a call and six arguments a tick: docs/performance.md, sixteenth
                # pass). The general path rolls the ring by one bucket (``_slot``: the new
                # slot zeroed) and adds to it; here the new slot's columns are written once,
                # as those additions to zero leave them (``0.0 +`` where that can differ:
                # -0.0), and the extremes as its compares against (inf, -inf) leave them:
                # ``dev`` and ``last_dev`` are never NaN (the engine's prices and pegs are
                # positive and finite, ``make_tick``), so ``min``/``max`` of them.
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
                # No min/max store for ``last_dev`` there (see the short path above).
                nb = b + 1
                new = nb % self.size
                if ts > end:  # [end, ts) in the new bucket: ``last_dev`` held there too
                    dt = ts - end
                    self._c_dev[new] = 0.0 + last_dev * dt
                    self._c_cov[new] = dt  # > 0: ``0.0 + dt`` is ``dt``
                    self._c_low[new] = dt if below_low else 0.0
                    self._c_high[new] = dt if below_low and below_high else 0.0
                    self._c_min[new] = dev if dev < last_dev else last_dev
                    self._c_max[new] = dev if dev > last_dev else last_dev
                    written = nb  # the newest bucket with time held in it
                else:  # on the boundary: the new bucket holds only the new price
                    self._c_dev[new] = 0.0
                    self._c_cov[new] = 0.0
                    self._c_low[new] = 0.0
                    self._c_high[new] = 0.0
                    self._c_min[new] = dev
                    self._c_max[new] = dev
                    written = b
                if below_low and written > self.low_b:
                    self.low_b = written
                if below_high and written > self.high_b:
                    self.high_b = written
                self.head = nb
                self._open = nb
                end = self._next_end  # (nb + 1) * bucket: exact
                self._open_end = end
                self._next_end = end + self.bucket
                self._open_slot = new
                change = dev - last_dev
                r2 = change * change  # never -0.0: ``0.0 + r2`` is ``r2``
                self._c_r2[new] = r2
                dt = ts - since  # ``base_ts`` is ``since`` (``_open``)
                if dt != self._decay_dt:
                    self._decay_dt = dt
                    self._decay = math.exp(-dt / self.base_tau)
                self.base_s = self.base_s * self._decay + r2
                self.base_ts = ts
                self._c_ticks[new] = 1.0  # 0.0 + 1.0
                self.last_price_ts = ts
                self.last_dev = dev
                return
        if self._h_dirty:
            self.sync()
        add_general(self, ts, dev, last_dev, since)

    # -- queries (read-only: the open interval since the last tick is added on the fly) --
    def window(self, now: float, seconds: float) -> Sums:
        """Sums over [now - seconds, now), bucket-aligned (a refresh at a bucket boundary
        sees exactly that interval), including the still-open interval since the last tick."""
        return window_sums(self, now, seconds)

    def buckets_below(self, now: float, seconds: float, level: float) -> int:
        """Buckets of [now - seconds, now) in which the price was known and *every* price
        held was more than ``level`` below peg (the highest deviation of the bucket is
        below ``-level``). Conservative on purpose: a bucket that touched the line does
        not count, so a hard floor built on this never fires on a brief dip."""
        return sum(1 for x in bucket_extremes(self, now, seconds, False) if x < -level)

    def buckets_above(self, now: float, seconds: float, level: float) -> int:
        """Buckets in which every price held was more than ``level`` *above* peg."""
        return sum(1 for x in bucket_extremes(self, now, seconds, True) if x > level)

    def bucket_extremes(self, now: float, seconds: float, *, above: bool) -> list[float]:
        """Per bucket of [now - seconds, now) in which the price was known, the extreme
        that must clear a line for the bucket to count as wholly beyond it: the lowest
        deviation held (``above``) or the highest (below)."""
        return bucket_extremes(self, now, seconds, above)

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
        self.sync()
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
        self._h_dirty = False  # the loaded ring is whole
        self._open = NEVER  # the general path first (it sets the mark again)
        self._open_end = self._next_end = -math.inf
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
