"""``Windows.add_price``'s general path: a price that is not in the head bucket after the
held one (``add_price``'s short path) nor in the bucket after it (its next-bucket path).

The first price of a ring, the first after a ``load``, a tick exactly on its bucket's end,
a gap of more than one bucket (a quiet feed's next round: the held price spread over every
bucket it covered, the ring rolled forward), a gap longer than the ring, and anything out
of order. Rare in a steady feed, so a module of its own: the ring's layout and its two
short paths stay together in ``windows.py``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .readings import NEVER
from .ringfields import _COV, _DEV, _HIGH, _LOW, _MAX, _MIN, _R2, _TICKS

if TYPE_CHECKING:  # the ring this writes (its companion module)
    from .windows import Windows


def add_general(w: Windows, ts: float, dev: float, last_dev: float | None,
                since: float | None) -> None:
    """``w.add_price(ts, dev)`` the general way: the price held since ``since``
    (``last_dev``, both None before the first) spread over the buckets up to ``ts``, the
    ring rolled to the new price's bucket, then the new price written."""
    f = w._f
    bucket = w.bucket
    new_b = int(ts // bucket)
    size = w.size
    if last_dev is not None and since is not None:
        if since < ts:  # tested first: the engine's case
            b = int(since // bucket)
            stop = (b + 1) * bucket
            head = w.head
            if ts <= stop and head is not None and b == head:
                # A tick in the bucket of the one before it that ``add_price``'s short
                # path did not take (on the bucket's end, or the first after a
                # ``load``). An interval inside one bucket is shorter than the ring:
                # no cut, and none of the loop below.
                slot = b % size
                dt = ts - since
                f[_DEV][slot] += last_dev * dt
                f[_COV][slot] += dt
                below_high = last_dev < -w.high
                if last_dev < -w.low:
                    f[_LOW][slot] += dt
                    if below_high:
                        f[_HIGH][slot] += dt
                    if b > w.low_b:
                        w.low_b = b
                if below_high and b > w.high_b:
                    w.high_b = b
                # No min/max store: ``last_dev`` is already within this bucket's
                # extremes. The call that took it wrote it into its bucket, ``b``
                # (then the head: ticks come in time order); extremes only widen
                # since, and nothing empties the head bucket while it is the head.
            else:  # [since, ts) from bucket ``b`` on, one pass per bucket
                t = since
                horizon = ts - size * bucket
                cut = t < horizon
                if cut:  # a gap longer than the ring: its newest stretch only
                    t = horizon
                    b = int(t // bucket)
                    stop = (b + 1) * bucket
                below_low = last_dev < -w.low
                below_high = last_dev < -w.high
                dev_c, cov_c, low_c, high_c, r2_c, ticks_c, min_c, max_c = f
                while True:  # one pass per bucket covered
                    if stop > ts:
                        stop = ts
                    dt = stop - t  # > 0: ``t`` < ``stop`` and ``t`` < ``ts``
                    slot = b % size
                    if head is not None and b <= head:
                        dev_c[slot] += last_dev * dt
                        cov_c[slot] += dt
                        if below_low:
                            low_c[slot] += dt
                            if below_high:
                                high_c[slot] += dt
                        if last_dev < min_c[slot]:
                            min_c[slot] = last_dev
                        if last_dev > max_c[slot]:
                            max_c[slot] = last_dev
                    else:  # rolling the ring forward by one bucket
                        if head is None or (b != head + 1 and not cut):
                            w._slot(b - 1)  # the buckets skipped, emptied
                        # (Cut to the ring, the passes from here write every slot of
                        # it afresh, the last bucket's too: nothing to empty first.)
                        # Bucket ``b`` written once, as ``_slot``'s zeros and the adds
                        # above leave it (``0.0 + dt`` is ``dt``: ``dt > 0``; the extremes'
                        # compares against (inf, -inf) leave ``last_dev``, never NaN): no
                        # call and no zeroing pass per bucket of a long gap.
                        w.head = head = b
                        dev_c[slot] = 0.0 + last_dev * dt
                        cov_c[slot] = dt
                        low_c[slot] = dt if below_low else 0.0
                        high_c[slot] = dt if below_low and below_high else 0.0
                        r2_c[slot] = 0.0
                        ticks_c[slot] = 0.0
                        min_c[slot] = last_dev
                        max_c[slot] = last_dev
                    t = stop
                    if t >= ts:
                        break
                    # ``t`` is bucket ``b``'s end, (b + 1) * bucket: a whole number of
                    # whole seconds below 2**53, so ``int(t // bucket)`` is ``b + 1``.
                    b += 1
                    stop = t + bucket  # (b + 1) * bucket, exactly
                    if stop <= ts and head is not None and b == head + 1:
                        # Whole buckets past the head up to ``ts``'s (a quiet feed's
                        # gap): all alike, so written as slices, not one pass each. The
                        # values of a fresh pass above with ``dt`` = ``bucket`` (exact).
                        last = int(ts // bucket) - 1  # the last whole one: >= b
                        n = last - b + 1  # <= size (the gap was cut to the ring)
                        s0 = b % size
                        full = 0.0 + last_dev * bucket
                        _fill(dev_c, s0, n, size, full)
                        _fill(cov_c, s0, n, size, bucket)
                        _fill(low_c, s0, n, size, bucket if below_low else 0.0)
                        _fill(high_c, s0, n, size,
                              bucket if below_low and below_high else 0.0)
                        _fill(r2_c, s0, n, size, 0.0)
                        _fill(ticks_c, s0, n, size, 0.0)
                        _fill(min_c, s0, n, size, last_dev)
                        _fill(max_c, s0, n, size, last_dev)
                        w.head = head = b = last
                        t = stop = (last + 1) * bucket
                        if t >= ts:
                            break
                        b += 1
                        stop = t + bucket
                # ``b`` is the newest bucket written: time below the lines reached it.
                if below_low and b > w.low_b:
                    w.low_b = b
                if below_high and b > w.high_b:
                    w.high_b = b
        elif ts < since:
            w._flags.clear()  # out of order (never from the engine): rework them
    b = new_b
    head = w.head
    # The new price's bucket is the head now unless it came before the head (a tick
    # out of order, never from the engine): then the short path stays shut.
    if head is not None and b <= head:
        slot = b % size
        if b == head:
            w._open = b
            w._open_end = end = (b + 1) * bucket
            w._next_end = end + bucket
        else:
            w._open = NEVER
            w._open_end = w._next_end = -math.inf
    else:
        slot = w._slot(b)
        w._open = b
        w._open_end = end = (b + 1) * bucket
        w._next_end = end + bucket
    w._open_slot = slot
    if last_dev is not None:
        change = dev - last_dev
        r2 = change * change
        f[_R2][slot] += r2
        base_ts = w.base_ts  # the decay then the change: the same two roundings
        if base_ts is None:
            w.base_s += r2
        else:
            w.base_s = w.base_s * math.exp(-(ts - base_ts) / w.base_tau) + r2
    w.base_ts = ts
    f[_TICKS][slot] += 1.0
    if dev < f[_MIN][slot]:
        f[_MIN][slot] = dev
    if dev > f[_MAX][slot]:
        f[_MAX][slot] = dev
    w.last_price_ts = ts
    w.last_dev = dev



def _fill(column: list[float], start: int, n: int, size: int, value: float) -> None:
    """``value`` into ``n`` ring slots from ``start`` on (wrapping past the end)."""
    first = min(n, size - start)
    column[start:start + first] = [value] * first
    if n > first:
        column[:n - first] = [value] * (n - first)
