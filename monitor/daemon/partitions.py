"""What one assigned tick partition holds: its own engine, position and restore marks.

One engine per partition: a revoked partition is dropped whole (its tokens move to
another instance with their state on the state topic) and an assigned one starts from the
states read back, without touching the tokens of the partitions that stay.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import ModelConfig
from ..engine import Engine
from ..ticks import Tick
from .coverage import Uncovered
from .state import StateRecord


@dataclass(slots=True)
class PartitionState:
    partition: int
    engine: Engine
    #: The next tick offset to process; records below it were already processed (the
    #: fetcher may hand a record twice around a rebalance, the engine must not see it twice).
    next_offset: int
    #: key -> the restored state's offset: that token's ticks below it are inside the state.
    skip_below: dict[str, int] = field(default_factory=dict)
    #: The offset last committed (or found committed at assignment).
    committed: int = -1
    #: Whether this instance committed it since the assignment: the first checkpoint
    #: commits even an unchanged offset, so the group holds one (a new group's offset may
    #: not move for ``state_max_age_seconds``, and tools show "never committed" until then).
    commit_sent: bool = False
    #: Tokens whose state changed since their last written state, and since when
    #: (``coverage.py``: which are due, how far the offset may be committed).
    uncovered: Uncovered = field(default_factory=Uncovered)
    #: key -> {id(tick): offset} of ticks handed to the engine that it may still hold for
    #: lateness; ``pending_offsets`` drops the entries of released ticks once they
    #: outnumber the held ones. Only the offset is kept, not the tick: a released tick is
    #: freed at once (keeping every tick alive until the next checkpoint cost a tuple per
    #: tick, memory, and the checkpoint their freeing).
    #: A listed id may then belong to a freed tick, but never wrongly to a tick the engine
    #: holds: a held tick was listed when taken, while alive, and an id can be given to
    #: another object only after its tick was freed (released), so the last entry under a
    #: held tick's id is its own. The one kind of held tick never taken, one restored
    #: inside a version 1 state, was alive before any entry of this partition was made.
    held: dict[str, dict[int, int]] = field(default_factory=dict)
    #: Where the group's committed offset stood at restore; below it only ``refeed``
    #: offsets are processed (everything else there is inside the restored states).
    resume_at: int = 0
    #: Offset -> key of ticks a restored compact state left out
    #: (``StateRecord.pending_offsets``) and not read again yet.
    refeed: dict[int, str] = field(default_factory=dict)

    @classmethod
    def restore(cls, partition: int, model: ModelConfig, position: int,
                states: dict[str, StateRecord],
                spread_gated: frozenset[str] = frozenset()) -> PartitionState:
        engine = Engine(model, spread_gated=spread_gated)
        refeed = {o: key for key, state in states.items() for o in state.pending_offsets}
        # Read again from the lowest tick a compact state left out (never above position).
        start = min(refeed, default=position)
        start = min(start, position)
        part = cls(partition=partition, engine=engine, next_offset=start,
                   resume_at=position, refeed=refeed)
        for key, state in states.items():
            engine.restore_state(state.engine_state)
            if state.offset > start:
                part.skip_below[key] = state.offset
        return part

    def should_skip(self, key: str, offset: int) -> bool:
        """True when the restored state of ``key`` already contains the tick at ``offset``
        (a tick its compact state left out is not contained: it is read again)."""
        if self.refeed.pop(offset, None) is not None:
            return False
        return skip_restored(self.skip_below, key, offset)

    def inside_restored(self, offset: int) -> bool:
        """True for a record below the restore position that no state left out: it is in
        the restored states (or was dead-lettered) already, so it is passed over whole."""
        return offset < self.resume_at and offset not in self.refeed

    def took(self, key: str, offset: int, tick: Tick) -> None:
        """The engine took ``tick`` (read at ``offset``); it may hold it for lateness."""
        held = self.held.get(key)
        if held is None:
            self.held[key] = {id(tick): offset}
        else:
            held[id(tick)] = offset

    def state_offset(self, key: str) -> int:
        """The offset a state of ``key`` written now is exact at: the position, or the
        restored state's own when the partition is still being read again below it."""
        return max(self.next_offset, self.skip_below.get(key, self.next_offset))

    def pending_offsets(self, key: str) -> list[int] | None:
        """Offsets of the ticks the engine holds for ``key``, in offset order; None when
        it holds one whose offset is unknown (restored inside an old, version 1 state):
        that state is then written whole, held ticks included."""
        # Left out by the restored state and not read again yet: still left out.
        unread = sorted(o for o, k in self.refeed.items() if k == key) if self.refeed else []
        pending = self.engine.pending(key)
        if not pending:
            self.held.pop(key, None)
            return unread
        held = self.held.get(key, {})
        try:  # the common case, every held tick's offset known: one comprehension
            offsets = [held[i] for i in map(id, pending)]
        except KeyError:
            self.held[key] = {i: held[i] for i in map(id, pending) if i in held}
            return None
        if len(held) > 2 * len(offsets) + 32:
            # Entries of released ticks are dropped only once they outnumber the held ones
            # (rebuilding the dict at every state write cost more than the lookups): stale
            # entries are harmless, as above, and this bounds them.
            self.held[key] = dict(zip(map(id, pending), offsets, strict=True))
        if unread:
            offsets += unread
        offsets.sort()
        return offsets


def skip_restored(skip_below: dict[str, int], key: str, offset: int) -> bool:
    """Whether the record of ``key`` at ``offset`` is inside that key's restored state (its
    mark in ``skip_below``); the mark is dropped at the first record past it. Shared by the
    monitor and the vault daemon."""
    mark = skip_below.get(key)
    if mark is None:
        return False
    if offset < mark:
        return True
    del skip_below[key]
    return False
