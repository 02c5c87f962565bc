"""What one assigned ``vaults.facts`` partition holds: its engine, position, restore marks.

The vault twin of ``monitor.daemon.partitions``: one engine per partition (a revoked
partition is dropped whole, its vaults move with their state on ``vaults.state``), sharing
the process's one depeg table. ``caught_up`` turns true once the partition's position
reached its high watermark after assignment: only then are depeg tier changes newer than a
restored vault's mark applied (``VaultEngine.catch_up``), so the re-processed facts of the
last checkpoint interval come first, in the order they had before a crash.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..daemon.partitions import skip_restored
from ..daemon.state import StateRecord
from .config import VaultsConfig
from .depeg_link import DepegTable
from .engine import VaultEngine


@dataclass(slots=True)
class VaultPartition:
    partition: int
    engine: VaultEngine
    #: The next fact offset to process (the fetcher may hand a record twice around a
    #: rebalance; the engine must not see it twice).
    next_offset: int
    #: key -> the restored state's offset: that vault's facts below it are inside the state.
    skip_below: dict[str, int] = field(default_factory=dict)
    committed: int = -1
    #: Vaults whose state changed since the last checkpoint.
    dirty: set[str] = field(default_factory=set)
    caught_up: bool = False

    @classmethod
    def restore(cls, partition: int, config: VaultsConfig, depeg: DepegTable, position: int,
                states: dict[str, StateRecord]) -> VaultPartition:
        engine = VaultEngine(config, depeg)
        part = cls(partition=partition, engine=engine, next_offset=position, committed=position)
        for key, state in states.items():
            engine.restore_state(state.engine_state)
            if state.offset > position:
                part.skip_below[key] = state.offset
        return part

    def should_skip(self, key: str, offset: int) -> bool:
        """True when the restored state of ``key`` already contains the fact at ``offset``."""
        return skip_restored(self.skip_below, key, offset)
