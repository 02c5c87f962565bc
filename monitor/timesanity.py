"""Time sanity: a tick dated too far in the future is refused before the engine sees it.

The engine orders each token's ticks by event time and drops those older than its
lateness window (``model.lateness_seconds``) behind the newest one it has seen. One tick
dated in the year 2100 would therefore make every real tick of that token "late" from then
on. So a tick is refused (dead letter ``future_ts``) when it is more than
``model.future_tolerance_seconds`` ahead of BOTH the wall clock and the newest tick
already accepted for its token: the wall clock catches a bad timestamp on a live feed and
in a replay of history alike (history is never ahead of the wall clock); the per-token
term only ever widens the bound, so a feed whose clock runs slightly ahead of this
machine's is not cut off once it is established.
"""

from __future__ import annotations

from .ticks import BadTick, Tick
from .timefmt import format_ts


def future_limit(newest_accepted: float | None, now: float, tolerance: float) -> float:
    """The latest event time a tick may carry."""
    reference = now if newest_accepted is None else max(now, newest_accepted)
    return reference + tolerance


def check_not_future(tick: Tick, newest_accepted: float | None, now: float,
                     tolerance: float) -> None:
    """Raise :class:`BadTick` ``future_ts`` when ``tick`` is dated too far ahead."""
    limit = future_limit(newest_accepted, now, tolerance)
    if tick.ts > limit:
        raise BadTick("future_ts", f"tick dated {format_ts(tick.ts)} is more than "
                      f"{tolerance:g}s ahead of the wall clock and of the token's newest tick "
                      f"(limit {format_ts(limit)})")
