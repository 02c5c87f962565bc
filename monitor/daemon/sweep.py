"""The live-clock sweep: refresh quiet tokens, export token gauges, report staleness.

Runs every ``kafka.live_clock_interval_seconds`` under the batch lock. A token quiet for
more than one refresh interval (``model.refresh_seconds``) of wall time is refreshed with
``Engine.advance`` up to its extrapolated event time (see ``clock.py``), so its rating
keeps moving every refresh interval (its held rating decays, its snapshots show the growing
staleness); the tier distribution, tracked and stale token counts are exported; stale
tokens are logged when their count changes, else once a minute (a dead feed is news once,
not every sweep).
"""

from __future__ import annotations

import time
from collections import Counter

from .. import metrics
from ..logs import get_logger
from .clock import LiveClock
from .outputs import OutputWriter
from .partitions import PartitionState

log = get_logger(__name__)

#: A steady stale count is logged again after this many seconds.
STALE_LOG_EVERY = 60.0


class Sweeper:
    def __init__(self, clock: LiveClock, refresh_seconds: float = 0.0) -> None:
        self.clock = clock
        #: Quiet this long (wall seconds) and a token is refreshed by the sweep; with
        #: refresh on every tick (0) only stale tokens are.
        self.quiet_after = (min(refresh_seconds, clock.stale_after) if refresh_seconds > 0
                            else clock.stale_after)
        self._logged: tuple[int, float] = (0, 0.0)  # (stale count, monotonic time)

    async def sweep(self, parts: dict[int, PartitionState], out: OutputWriter) -> int:
        """One sweep; returns the number of stale tokens."""
        started = time.monotonic()
        due = self.clock.due(self.quiet_after)
        for key, partition, until in due:
            part = parts.get(partition)
            if part is None:
                continue
            outputs = part.engine.advance(key, until)
            if outputs:
                part.uncovered.changed(key, started)
                await out.emit(outputs)
        tiers: Counter[str] = Counter()
        tracked = 0
        for part in parts.values():
            for key in part.engine.keys():
                tracked += 1
                tier = part.engine.tier_of(key)
                if tier is not None:
                    tiers[tier.value] += 1
        metrics.set_tier_counts(dict(tiers))
        metrics.TOKENS_TRACKED.set(tracked)
        stale = self.clock.stale()
        metrics.TOKENS_STALE.set(len(stale))
        count, at = self._logged
        if stale and (len(stale) != count or started - at > STALE_LOG_EVERY):
            self._logged = (len(stale), started)
            log.warning("monitor.stale_tokens", count=len(stale),
                        stale_after_seconds=self.clock.stale_after, sample=sorted(stale)[:10])
        elif not stale and count:
            self._logged = (0, started)
            log.info("monitor.stale_tokens_cleared")
        metrics.REFRESH_SECONDS.observe(time.monotonic() - started)
        return len(stale)
