"""What one assigned tick partition holds: its own engine, position and restore marks.

One engine per partition: a revoked partition is dropped whole (its tokens move to
another instance with their state on the state topic) and an assigned one starts from the
states read back, without touching the tokens of the partitions that stay.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import ModelConfig
from ..engine import Engine
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
    #: Tokens whose state changed since the last checkpoint.
    dirty: set[str] = field(default_factory=set)

    @classmethod
    def restore(cls, partition: int, model: ModelConfig, position: int,
                states: dict[str, StateRecord],
                spread_gated: frozenset[str] = frozenset()) -> PartitionState:
        engine = Engine(model, spread_gated=spread_gated)
        part = cls(partition=partition, engine=engine, next_offset=position)
        for key, state in states.items():
            engine.restore_state(state.engine_state)
            if state.offset > position:
                part.skip_below[key] = state.offset
        return part

    def should_skip(self, key: str, offset: int) -> bool:
        """True when the restored state of ``key`` already contains the tick at ``offset``."""
        return skip_restored(self.skip_below, key, offset)


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
