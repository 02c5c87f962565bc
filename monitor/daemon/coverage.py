"""Which tokens' states a checkpoint writes, and how far the partition's offset may move.

A token's state record is rewritten whole (a ~1.6 KB deflated ring of 60 buckets), so
writing it at every checkpoint in which the token ticked made the state topic, at one tick
per token per minute, ~5× the bytes of the ticks topic. Instead a checkpoint writes a
token's state only when it is *due*:

- it has ``every_ticks`` or more ticks not inside its last written state (busy tokens: a
  state per ``every_ticks`` ticks, whatever the rate), or
- the oldest of those ticks was processed ``max_age`` seconds of wall time ago or more
  (quiet tokens: their state trails by at most that), or
- it changed without a tick (the live-clock refresh, an opened spread gate): those changes
  depend on the wall clock, so a restart could not make them again byte for byte; they
  are written at the next checkpoint, as every change was before.

On revoke and on a clean stop every changed token is written, whatever is due.

What this costs is what may be committed. A state record says "every tick of this token
below ``offset`` is inside me", so a tick not inside any written state must be read again
after a crash: the partition's committed offset may only advance to the lowest offset of
a tick not covered by its token's written state (:meth:`Uncovered.commit_offset`), and the
partition's position when every token is covered. Below that offset every tick of every
token is inside its token's state; at or above it the restore skips, per token, the ticks
below that token's own state offset (``PartitionState.skip_below``). So recovery stays
exact; a kill -9 re-reads (and re-publishes, byte-identical, with the same event ids) at
most ``max_age`` seconds plus one checkpoint interval of the partition, instead of one
interval.

A held tick read again after a restore (listed in ``pending_offsets``) is recorded like
any other: conservative, it holds the offset (already committed past it) until its token
is written again.

Pure: the caller hands in the wall time (any monotonic clock) and the offsets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(slots=True)
class Uncovered:
    """One partition's tokens whose engine state has changed since their last written
    state. The ingest loop updates ``count``/``first_offset``/``since`` inline (its hot
    path); everything else goes through the methods."""

    #: key -> ticks processed since its last written state.
    count: dict[str, int] = field(default_factory=dict)
    #: key -> offset of the first of those ticks (the lowest: offsets only grow).
    first_offset: dict[str, int] = field(default_factory=dict)
    #: key -> wall time the first change since its last written state was made.
    since: dict[str, float] = field(default_factory=dict)
    #: Changed without a tick (live clock, spread gate): written at the next checkpoint.
    urgent: set[str] = field(default_factory=set)

    def took(self, key: str, offset: int, now: float) -> None:
        """The engine took the tick of ``key`` at ``offset`` (``ingest.py`` inlines this)."""
        n = self.count.get(key)
        if n is None:
            self.count[key] = 1
            self.first_offset[key] = offset
            self.since.setdefault(key, now)
        else:
            self.count[key] = n + 1

    def changed(self, key: str, now: float) -> None:
        """``key``'s state changed without a tick: write it at the next checkpoint."""
        self.urgent.add(key)
        self.since.setdefault(key, now)

    def changed_keys(self) -> set[str]:
        """Every token whose state differs from its last written one."""
        return set(self.since)

    def due(self, now: float, every_ticks: int, max_age: float) -> list[str]:
        """The tokens a checkpoint at ``now`` writes (sorted, so the records go out in
        the same order on every run)."""
        count = self.count
        oldest = now - max_age
        return sorted(key for key, at in self.since.items()
                      if at <= oldest or key in self.urgent or count.get(key, 0) >= every_ticks)

    def written(self, keys: Iterable[str]) -> None:
        """The states of ``keys`` are on the broker: nothing of theirs is uncovered."""
        for key in keys:
            self.count.pop(key, None)
            self.first_offset.pop(key, None)
            self.since.pop(key, None)
            self.urgent.discard(key)

    def commit_offset(self, position: int) -> int:
        """The furthest offset the partition may commit: its lowest tick not inside its
        token's written state, else ``position`` (the next offset to read)."""
        return min(self.first_offset.values(), default=position)

    def __len__(self) -> int:
        return len(self.since)
