"""The spread stage and the engine in one deterministic order (replay, tests).

Every market tick goes to the engine, then to the stage; the spread ticks the stage makes
due go to the engine right after. The daemon's order differs (the spread ticks arrive in
the token's partition whenever the stage published them), and the engine's spread gate
makes that difference invisible (docs/cross-chain-spread.md).
"""

from __future__ import annotations

from ..config import Config
from ..engine import Engine, Output
from ..registry import RegistryError, load_registry
from ..ticks import Tick
from .assets import AssetMap, asset_map
from .stage import SpreadStage


def assets_for(config: Config) -> AssetMap:
    """The multi-chain assets of the configured registry (none when spread is off)."""
    if not config.spread.enabled:
        return AssetMap({})
    return asset_map(load_registry(config.registry.path))


def gated_keys(config: Config, assets: AssetMap | None = None) -> frozenset[str]:
    """The token keys whose ratings wait for spread observations (the engine's gate): the
    same rule for the daemon's engines and the replay's. Raises RegistryError."""
    if config.model.refresh_seconds <= 0:
        return frozenset()
    return (assets_for(config) if assets is None else assets).keys


def gated_keys_or_none(config: Config) -> frozenset[str]:
    """:func:`gated_keys` for the monitor daemon: an unreadable registry is logged and
    nothing is gated. Ratings without spread beat no ratings (the spread stage, reading
    the same registry, publishes nothing then either)."""
    try:
        return gated_keys(config)
    except RegistryError as exc:
        from ..logs import get_logger  # here: a replay imports this module, not structlog

        get_logger(__name__).error("monitor.registry_unreadable", error=str(exc)[:300],
                  consequence="no cross-chain spread; ratings go on without it")
        return frozenset()


def make_stage(config: Config, assets: AssetMap) -> SpreadStage:
    s = config.spread
    return SpreadStage(assets, every=config.model.refresh_seconds,
                       price_max_age=s.price_max_age_seconds, quiet_after=s.quiet_after_seconds)


class SpreadFeed:
    """An engine with the spread stage in front of it, when there are assets to compare.

    Spread ticks already in the input (a dump of ``depeg.ticks``) are dropped and counted:
    the stage recomputes them, so a replay gives the same result with or without them.
    """

    def __init__(self, config: Config, *, snapshots: bool = True,
                 assets: AssetMap | None = None) -> None:
        assets = assets_for(config) if assets is None else assets
        gated = gated_keys(config, assets)
        self.stage = make_stage(config, assets) if gated else None
        # No tags: this feed's ticks come from a file or a test, not from records.
        self.engine = Engine(config.model, snapshots=snapshots, spread_gated=gated,
                             keep_tags=False)
        self.input_spread_dropped = 0

    def process(self, tick: Tick) -> list[Output]:
        stage = self.stage
        if stage is None:
            return self.engine.process(tick)
        if tick.cross_chain_chains is not None:
            self.input_spread_dropped += 1
            return []
        out = self.engine.process(tick)
        for spread in stage.process(tick):
            out.extend(self.engine.process(spread))
        return out

    def flush(self) -> list[Output]:
        out: list[Output] = []
        if self.stage is not None:
            for spread in self.stage.flush():
                out.extend(self.engine.process(spread))
        out.extend(self.engine.flush())
        return out
