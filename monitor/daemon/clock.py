"""The live clock: quiet tokens are still refreshed, in event time, by a wall-clock timer.

Event time drives the windows even live (ticks may be historical, e.g. a 2023 replay), so
a quiet token's clock is extrapolated from its own last tick::

    event_now = last_event_ts + (wall_now - wall time that tick was received)

A token quiet for one refresh interval of *wall* time is refreshed up to that extrapolated
event time on every sweep (so a quiet token is re-evaluated every refresh interval, not
only once it is stale), and it counts as stale after ``stale_after`` seconds of wall time
without a tick: a replay at 60x never trips either, while a dead feed does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable


class LiveClock:
    def __init__(self, stale_after: float, now: Callable[[], float] = time.monotonic) -> None:
        self.stale_after = stale_after
        self._now = now
        #: key -> (event time of its newest tick, wall time that tick arrived, partition)
        self._seen: dict[str, tuple[float, float, int]] = {}

    def __len__(self) -> int:
        return len(self._seen)

    def tick(self, key: str, event_ts: float, partition: int) -> None:
        """A tick arrived for ``key`` (keeps the newest event time, stamps the wall time)."""
        old = self._seen.get(key)
        newest = event_ts if old is None or event_ts > old[0] else old[0]
        self._seen[key] = (newest, self._now(), partition)

    def ticked(self, newest: dict[str, float], partition: int) -> None:
        """``tick`` for each key of ``newest`` (its newest event time in one batch), with
        one wall stamp for them all: the ingest loop's per-batch form."""
        if not newest:
            return
        now = self._now()
        seen = self._seen
        for key, event_ts in newest.items():
            old = seen.get(key)
            seen[key] = (event_ts if old is None or event_ts > old[0] else old[0], now,
                         partition)

    def restored(self, key: str, event_ts: float | None, partition: int) -> None:
        """State came back from the state topic: wall time restarts now (we cannot know
        how long the feed was quiet before the restart, so it gets a full grace period)."""
        if event_ts is not None:
            self._seen[key] = (event_ts, self._now(), partition)

    def last_event_ts(self, key: str) -> float | None:
        seen = self._seen.get(key)
        return seen[0] if seen else None

    def forget(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._seen.pop(key, None)

    def is_stale(self, key: str) -> bool:
        seen = self._seen.get(key)
        return seen is not None and self._now() - seen[1] > self.stale_after

    def stale(self) -> list[str]:
        """Every token quiet past ``stale_after`` seconds of wall time."""
        now = self._now()
        return [key for key, (_, wall, _) in self._seen.items() if now - wall > self.stale_after]

    def due(self, quiet_after: float | None = None) -> list[tuple[str, int, float]]:
        """``(key, partition, extrapolated event time)`` for every token quiet for more
        than ``quiet_after`` seconds of wall time (default: ``stale_after``)."""
        now = self._now()
        after = self.stale_after if quiet_after is None else quiet_after
        return [
            (key, partition, event_ts + (now - wall))
            for key, (event_ts, wall, partition) in self._seen.items()
            if now - wall > after
        ]
