"""The cross-chain spread stage: one asset's prices on every chain -> a spread observation
published into each of the asset's tokens' own tick stream (docs/cross-chain-spread.md).

- ``assets``: which token keys belong to which asset (from the registry);
- ``stage``: the pure stage (ticks in, spread ticks out; no I/O, no clock);
- ``feed``: the stage and the engine wired together in one deterministic order (replay);
- ``service``: the ``depeg-monitor spread`` command and the ``run`` service (Kafka).
"""

from .assets import AssetMap, asset_map
from .stage import SpreadStage

__all__ = ["AssetMap", "SpreadStage", "asset_map"]
