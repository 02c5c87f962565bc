"""Depeg episodes from a token's tier changes: pure, so replays rebuild the same rows.

An episode opens when the token leaves ok/premium (the first tier change to watch,
warning or critical while none is open) and closes at the first change back to ok or
premium (its recovery). Peak deviation and the worst tier come from the snapshots and
events inside it; the store fills those from its tables.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..records import SEVERITY, Tier

BY_SEVERITY = {1: Tier.WATCH.value, 2: Tier.WARNING.value, 3: Tier.CRITICAL.value}


def severity(tier: str) -> int:
    try:
        return SEVERITY[Tier(tier)]
    except ValueError:
        return 0


@dataclass(frozen=True)
class TierChange:
    event_id: str
    ts: float
    old_tier: str
    new_tier: str


@dataclass
class Episode:
    started_at: float
    start_event_id: str
    started_tier: str
    worst_severity: int
    recovered_at: float | None = None
    recovery_event_id: str | None = None
    event_ids: list[str] = field(default_factory=list)

    @property
    def worst_tier(self) -> str:
        return BY_SEVERITY.get(self.worst_severity, self.started_tier)


def build_episodes(changes: Iterable[TierChange]) -> list[Episode]:
    """Changes must be in event-time order (ties by event id, as the store reads them)."""
    episodes: list[Episode] = []
    current: Episode | None = None
    for change in changes:
        level = severity(change.new_tier)
        if current is None:
            if level > 0:
                current = Episode(change.ts, change.event_id, change.new_tier, level,
                                  event_ids=[change.event_id])
                episodes.append(current)
            continue
        current.event_ids.append(change.event_id)
        if level == 0:
            current.recovered_at = change.ts
            current.recovery_event_id = change.event_id
            current = None
        else:
            current.worst_severity = max(current.worst_severity, level)
    return episodes
