"""The monitor daemon: ticks from Kafka through the engine, outputs back to Kafka.

One idea per module (the vault daemon, ``monitor.vaults.daemon``, is built from the same
broker parts: ``brokercalls``, ``clients``, ``publisher``, ``readiness``, ``rebalance``,
``state``, ``deadletter``):

- ``ingest``: the consume -> engine -> publish -> checkpoint -> commit loop (``MonitorDaemon``),
  built in layers: ``base`` (what they share), ``losswatch`` (the broker-loss checks),
  ``checkpoint`` (states, then offsets), ``assignment`` (revoke, take back, restore);
- ``outputs``: tier changes, rating snapshots and dead letters onto their topics, counted;
- ``partitions``: what one assigned partition holds (its engine, position, restore marks);
- ``rebalance``: the assignment listener, where a partition resumes, the restore guard;
- ``readiness``: what ``/readyz`` says about the monitor;
- ``state``: the per-token snapshots on the compacted state topic, and reading them back;
- ``publisher``: sends records and waits until the broker acknowledged them;
- ``retry``: backoff for broker operations, bounded only by a shutdown's grace period;
- ``brokercalls``: one daemon's retry policy (forever while running, a grace after a stop);
- ``lifecycle``: what the monitor and the vault daemon share around their loops (set-up,
  counts, the way out);
- ``clients``: starting the Kafka clients, and offset commits the group may fence;
- ``deadletter``: the small, self-describing record a bad tick becomes;
- ``clock``: extrapolated event time for tokens whose ticks stopped;
- ``sweep``: the periodic live-clock refresh of quiet tokens, token gauges, stale logs;
- ``service``: the ``depeg-monitor monitor`` command and the ``run`` service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..compiled import search_first as _search_first

# ``feed`` (the per-tick loop) is one of the compiled build's modules (monitor/compiled.py).
_search_first(__name__, __path__)

if TYPE_CHECKING:
    from .ingest import MonitorDaemon
    from .outputs import DaemonStats

__all__ = ["DaemonStats", "MonitorDaemon"]


def __getattr__(name: str) -> object:
    """``MonitorDaemon`` and ``DaemonStats`` imported on first use, not with the package:
    ``depeg-monitor monitor --help`` imports ``.service``, which must not pull in aiokafka
    and the engines through this file."""
    if name == "MonitorDaemon":
        from .ingest import MonitorDaemon

        return MonitorDaemon
    if name == "DaemonStats":
        from .outputs import DaemonStats

        return DaemonStats
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
