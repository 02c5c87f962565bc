"""A refresh's window reads in the pure build: ``readings.read_fields`` with each window's
fields grouped once per configuration, so the interpreter walks fewer branches.

``read_fields`` tests every field it reads for its kind (additive or extreme, the two
columns that may be all zeros, an empty, wrapped or one-bucket slice): ~35 bytecodes a
field around each ``sum``, and a rating snapshot reads 16 values of four windows. A
:data:`Plan` (made once per configuration, on ``Params``) lists per window its additive
fields, then LOW and HIGH, then whether MIN and MAX are read; :func:`read_plan` sums each
over the same ring slices with the same builtin from the same start (``sum(cells)``
from int 0 is ``0.0 + first cell`` then each cell in order, as ``sum(cells, 0.0)`` on
a non-empty slice; two folds added when the slice wraps the ring), then adds the held
stretch's addend: the very same floats in the very same order. Extremes: the builtins
over the same slices, compared as ``read_fields`` does. The values come out through the
plan's ``picks`` in the order the spec (and ``evaluate``) wants them.

The compiled build keeps ``read_fields`` (native loops over the ring, no slice copies),
so this module is not compiled (monitor/compiled.py MODULES).
tests/engine/test_readplan.py compares it with ``read_fields`` bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final

from .readings import NEVER
from .ringfields import _HIGH, _LOW, _MAX, _MIN

if TYPE_CHECKING:  # these read a Windows' ring directly (its companion module)
    from .windows import Windows

#: One window of a plan: its length; the additive fields summed at every read; LOW and
#: HIGH when read (summed only while a column has time in the window: ``read_fields``'
#: short-cut, see :func:`read_plan`); whether its MIN and MAX are read.
Window = tuple[float, tuple[int, ...], tuple[int, ...], bool, bool]
#: The windows in order, and how to put their values in the spec's order (None: already).
Plan = tuple[tuple[Window, ...], Callable[[list[float]], Any] | None]


def make_plan(spec: Sequence[tuple[float, Sequence[int]]],
              wanted: Sequence[int] | None = None) -> Plan:
    """The plan of a ``read_fields`` spec: per window its summed fields in field order
    (LOW and HIGH apart), then MIN, then MAX; and the picks giving the values at
    positions ``wanted`` of ``read_fields``' list (default: all of them, in order)."""
    windows: list[Window] = []
    order: list[tuple[int, int]] = []  # (window, field) in the plan's value order
    for n, (seconds, which) in enumerate(spec):
        if len(set(which)) != len(which):
            raise ValueError("a window's fields are read once each")
        sums = tuple(i for i in sorted(which) if i < _MIN and i not in (_LOW, _HIGH))
        zeros = tuple(i for i in sorted(which) if i in (_LOW, _HIGH))
        windows.append((float(seconds), sums, zeros, _MIN in which, _MAX in which))
        order += [(n, i) for i in (*sums, *zeros, *(x for x in (_MIN, _MAX) if x in which))]
    flat = [(n, i) for n, (_, which) in enumerate(spec) for i in which]
    at = {key: k for k, key in enumerate(order)}
    picks = [at[flat[k]] for k in (range(len(flat)) if wanted is None else wanted)]
    if picks == list(range(len(order))):
        return tuple(windows), None
    if len(picks) == 1:  # itemgetter of one index gives the item, not a tuple
        return tuple(windows), lambda values: [values[picks[0]]]
    return tuple(windows), itemgetter(*picks)


def read_plan(w: Windows, now: float, plan: Plan) -> Any:
    """``read_fields(w, now, spec)`` (through the plan's picks) for the spec ``plan`` was
    made from: the very same floats (the module's docstring)."""
    bucket = w.bucket
    size = w.size
    end_b = int(now // bucket)
    if now == end_b * bucket:
        end_b -= 1
    oldest = end_b - size + 1
    head = w.head
    dev = w.last_dev
    w.sync()  # the open bucket, added up apart, into the ring first
    f = w._f
    below_low = below_high = False
    since = None
    if dev is not None:
        since = w.last_price_ts
        below_low = dev < -w.low
        below_high = below_low and dev < -w.high
    ring_lo = NEVER if head is None else head - size + 1
    low_b, high_b = w.low_b, w.high_b
    out: list[float] = []
    append = out.append
    windows, picks = plan
    for seconds, sums, zeros, has_min, has_max in windows:
        first_b = math.ceil((now - seconds) / bucket)
        if first_b < oldest:
            first_b = oldest
        dt = 0.0
        if since is not None:
            start = first_b * bucket
            if since > start:
                start = since
            if now > start:
                dt = now - start
        held = dt != 0.0 and dev is not None
        # What the held stretch adds to each additive field (``read_fields``' ``add``).
        add: tuple[float, ...] = _NO_ADD if not held or dev is None else (
            dev * dt, dt, dt if below_low else 0.0, dt if below_high else 0.0, 0.0, 0.0)
        lo = first_b if first_b > ring_lo else ring_lo
        hi = end_b if head is None or end_b < head else head
        if head is None or lo > hi:  # no ring bucket in the window
            for i in sums:
                append(0.0 + add[i])
            for i in zeros:
                append(0.0 + add[i])
            if has_min:
                append(dev if held and dev is not None and dev < math.inf else math.inf)
            if has_max:
                append(dev if held and dev is not None and dev > -math.inf else -math.inf)
            continue
        a, b = lo % size, hi % size
        if a <= b:
            b1 = b + 1
            for i in sums:
                append(sum(f[i][a:b1]) + add[i])
            if zeros:
                # Nothing below the line since before the window (``low_b``/``high_b``):
                # every cell is 0.0, so is the sum (``read_fields``' short-cut).
                if low_b < lo and high_b < lo:
                    for i in zeros:
                        append(0.0 + add[i])
                else:
                    for i in zeros:
                        append(sum(f[i][a:b1]) + add[i])
            if has_min:
                x = min(f[_MIN][a:b1])
                acc = x if x < math.inf else math.inf
                if held and dev is not None and dev < acc:
                    acc = dev
                append(acc)
            if has_max:
                x = max(f[_MAX][a:b1])
                acc = x if x > -math.inf else -math.inf
                if held and dev is not None and dev > acc:
                    acc = dev
                append(acc)
        else:  # the window wraps past the ring's end: two folds, added
            b1 = b + 1
            for i in sums:
                column = f[i]
                append(sum(column[a:]) + sum(column[:b1]) + add[i])
            if zeros:
                if low_b < lo and high_b < lo:
                    for i in zeros:
                        append(0.0 + add[i])
                else:
                    for i in zeros:
                        column = f[i]
                        append(sum(column[a:]) + sum(column[:b1]) + add[i])
            if has_min:
                column = f[_MIN]
                acc = math.inf
                x = min(column[a:])
                if x < acc:
                    acc = x
                x = min(column[:b1])
                if x < acc:
                    acc = x
                if held and dev is not None and dev < acc:
                    acc = dev
                append(acc)
            if has_max:
                column = f[_MAX]
                acc = -math.inf
                x = max(column[a:])
                if x > acc:
                    acc = x
                x = max(column[:b1])
                if x > acc:
                    acc = x
                if held and dev is not None and dev > acc:
                    acc = dev
                append(acc)
    return out if picks is None else picks(out)


#: ``read_plan``'s addends when no price is held over a window.
_NO_ADD: Final = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
