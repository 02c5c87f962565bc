"""Liveness for spread-gated tokens: open the gate when the spread stage is down.

A token of a multi-chain asset is rated only up to its newest cross-chain spread
observation (``Engine.spread_gated``; docs/cross-chain-spread.md), which is what keeps the
daemon byte-identical to a replay. If the spread stage stops, those tokens would stop being
rated: a missed alert. So, on the wall clock: a gated token whose ticks are more than
``allowed_lag`` event seconds ahead of its spread observations for ``spread.gate_timeout_
seconds`` is released without waiting (logged, counted); the spread observations that
arrive later for boundaries already refreshed are dropped as late. Only then can the
daemon's ratings differ from a replay's.
"""

from __future__ import annotations

import time

from .. import metrics
from ..config import Config
from ..logs import get_logger
from .outputs import OutputWriter
from .partitions import PartitionState

log = get_logger(__name__)


class GateWatch:
    def __init__(self, config: Config) -> None:
        self.timeout = config.spread.gate_timeout_seconds
        m = config.model
        # Normal operation: a boundary waits for every chain to pass it (up to the quiet
        # allowance), plus the engine's own lateness, plus one refresh interval.
        self.allowed_lag = (m.refresh_seconds + m.lateness_seconds
                            + config.spread.quiet_after_seconds)
        self._since: dict[str, float] = {}
        #: Gates open now (released at every check until the spread catches up again).
        self._open: set[str] = set()
        self.opened = 0

    async def check(self, parts: dict[int, PartitionState], out: OutputWriter,
                    now: float | None = None) -> int:
        """Open the gates that waited too long; returns how many were opened."""
        now = time.monotonic() if now is None else now
        behind: set[str] = set()
        opened: list[str] = []
        for part in parts.values():
            engine = part.engine
            for key in engine.spread_gated.intersection(engine.keys()):
                if engine.spread_lag(key) <= self.allowed_lag:
                    continue
                behind.add(key)
                since = self._since.setdefault(key, now)
                if now - since < self.timeout:
                    continue
                outputs = engine.open_gate(key)
                part.uncovered.changed(key, now)
                if key not in self._open:
                    self._open.add(key)
                    opened.append(key)
                if outputs:
                    await out.emit(outputs)
        for key in list(self._since):
            if key not in behind:
                del self._since[key]
        closed = sorted(self._open - behind)
        self._open -= set(closed)
        if opened:
            self.opened += len(opened)
            metrics.SPREAD_GATES_OPENED.inc(len(opened))
            log.warning("monitor.spread_gate_opened", tokens=len(opened),
                        sample=sorted(opened)[:10], timeout_seconds=self.timeout,
                        hint="the spread stage (`depeg-monitor spread`) is down or far "
                             "behind; these ratings go on without cross-chain spread")
        if closed:
            log.info("monitor.spread_gate_closed", tokens=len(closed), sample=closed[:10])
        return len(opened)
