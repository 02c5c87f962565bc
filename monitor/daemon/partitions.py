"""What one assigned tick partition holds: its own engine, position and restore marks.

One engine per partition: a revoked partition is dropped whole (its tokens move to
another instance with their state on the state topic) and an assigned one starts from the
states read back, without touching the tokens of the partitions that stay.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import ModelConfig
from ..engine import Engine
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
    #: Where the group's committed offset stood at restore; below it only ``refeed``
    #: offsets are processed (everything else there is inside the restored states).
    resume_at: int = 0
    #: Token address -> (its key, chain, record key) once a record of it matched its
    #: tick (``ingest.py``'s record key check); an address on two chains keeps the first.
    token_keys: dict[str, tuple[str, str, bytes]] = field(default_factory=dict)
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

    def state_offset(self, key: str) -> int:
        """The offset a state of ``key`` written now is exact at: the position, or the
        restored state's own when the partition is still being read again below it."""
        return max(self.next_offset, self.skip_below.get(key, self.next_offset))

    def pending_offsets(self, key: str) -> list[int] | None:
        """Offsets of the ticks the engine holds for ``key``, in offset order; None when
        it holds one whose offset is unknown (restored inside an old, version 1 state):
        that state is then written whole, held ticks included.

        The ingest loop hands the engine each tick's offset as its tag
        (``Engine.process``), so the engine keeps them beside its held ticks: nothing per
        tick here (a map of tick ids to offsets cost a lookup and a store per tick, and
        its pruning at every state written)."""
        tags = self.engine.pending_tags(key)
        offsets = [o for o in tags if o is not None]
        if len(offsets) != len(tags):
            return None
        if self.refeed:  # left out by the restored state and not read again yet
            offsets += [o for o, k in self.refeed.items() if k == key]
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
