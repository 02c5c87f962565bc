"""What every part of the monitor daemon shares: its partitions, clients, lock and clock.

``MonitorDaemon`` (``ingest.py``) is built in layers, one idea per module, each a class the
next one extends: this state; ``losswatch`` (noticing a broker that lost our records);
``checkpoint`` (states, then offsets); ``assignment`` (revoke and assign); ``ingest`` (the
loop itself). They all read and write the attributes set up here, under ``_lock``.
"""

from __future__ import annotations

from prometheus_client import Gauge

from ..config import Config
from ..spread.feed import gated_keys_or_none
from .clock import LiveClock
from .lifecycle import ConsumerDaemon
from .lost import LossDetector
from .outputs import DaemonStats, OutputWriter
from .partitions import PartitionState
from .spread_gate import GateWatch
from .sweep import Sweeper

#: The logger of every layer: the one module the daemon was before its split, so log
#: queries that filter on the logger field still see all of its lines.
LOGGER = "monitor.daemon.ingest"


class MonitorBase(ConsumerDaemon):
    """The attributes the layers share, set up once (the constructor of ``MonitorDaemon``);
    those of the lifecycle the vault daemon shares are set up by ``ConsumerDaemon``."""

    def __init__(self, config: Config, check_name: str = "monitor") -> None:
        super().__init__(config, check_name)
        self.stats = DaemonStats()
        self._parts: dict[int, PartitionState] = {}
        #: Tokens whose ratings wait for the spread stage (docs/cross-chain-spread.md).
        self._spread_gated = gated_keys_or_none(config)
        #: Revoked partitions, until the next assignment says whether they come back.
        self._set_aside: dict[int, PartitionState] = {}
        self._clock = LiveClock(config.model.stale_after_seconds)
        self._sweeper = Sweeper(self._clock, config.model.refresh_seconds)
        self._gates = GateWatch(config)
        self._out: OutputWriter | None = None
        self._losses = LossDetector()
        #: Monotonic time the loop last started an iteration (None before the loop runs).
        self._loop_beat: float | None = None
        #: Counts the restore's seeks; partition -> the count at its latest seek. A batch
        #: fetched before a partition's seek holds records from the old position for it.
        self._seeks = 0
        self._seeked: dict[int, int] = {}
        self._lag_gauges: dict[int, Gauge] = {}

    def _describe(self) -> str:
        tokens = sum(len(list(part.engine.keys())) for part in self._parts.values())
        return f"{len(self._parts)} partitions, {tokens} tokens"
