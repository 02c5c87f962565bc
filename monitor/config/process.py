"""The sections of how a process runs: storage, logs, metrics, the garbage collector and
the cross-chain spread stage."""

from __future__ import annotations

import msgspec


class StorageConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    #: Runtime files (SQLite database, secret key, ``run`` state, replay outputs) go here.
    #: Empty: $XDG_DATA_HOME/depeg-monitor, else ~/.local/share/depeg-monitor -- never
    #: the current directory (monitor/paths.py). Also ``--data-dir``.
    data_dir: str = ""
    #: ``sqlite:///path/to/file.db`` or ``postgresql://user@host/db``. Empty: the SQLite
    #: file depeg-monitor.db in the data directory.
    url: str = ""
    #: Rating history older than this is deleted by the store writer.
    retention_days: int = 30


class LoggingConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    level: str = "info"
    #: ``json`` for production, ``console`` for a terminal, ``auto`` picks by isatty.
    format: str = "auto"


class MetricsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    #: Port of the /metrics, /healthz, /readyz listener of processes without the API.
    port: int = 9108
    host: str = "127.0.0.1"
    #: At most this many tokens get per-token series (depeg_token_*); see monitor/metrics.py.
    token_series_cap: int = 500
    #: /readyz fails when a consumer's total lag exceeds this many records.
    max_ready_lag_records: int = 100000


class SpreadConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The cross-chain spread stage (docs/cross-chain-spread.md)."""

    #: Off: no spread observations, and no token waits for them.
    enabled: bool = True
    #: A chain's price older than this at a boundary is not part of that boundary's spread.
    price_max_age_seconds: int = 900
    #: A chain whose ticks stopped is left out of a boundary once the asset's other chains
    #: are this far past it (event time), so one quiet chain does not hold the others. The
    #: trade-off: a sparse chain delays its asset's boundaries by up to this much; a
    #: producer publishing more than this late can make the daemon differ from a replay.
    quiet_after_seconds: int = 300
    #: The monitor rates a gated token without waiting for its spread once it has waited
    #: this long (wall clock) past the normal lag: the stage is down or far behind.
    gate_timeout_seconds: float = 120.0
    #: Compacted topic of the stage's own state (offsets + per-asset state; internal).
    state_topic: str = "depeg.spread-state"


class GcConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Python's cyclic garbage collector in the long-running services (monitor/gcpolicy.py,
    docs/performance.md): once a service has started, its start-up heap is frozen and the
    collections run less often, so a generation-2 pass no longer walks every long-lived
    object of the process."""

    #: false keeps CPython's defaults (thresholds 700/10/10, nothing frozen).
    enabled: bool = True
    #: Freeze (gc.freeze) what exists once the service has started: never scanned again.
    freeze: bool = True
    #: Allocations minus deallocations of tracked objects between generation-0 collections.
    threshold0: int = 50000
    #: Generation-0 collections per generation-1 collection.
    threshold1: int = 20
    #: Generation-1 collections per generation-2 (full) collection.
    threshold2: int = 10

    def __post_init__(self) -> None:
        if min(self.threshold0, self.threshold1, self.threshold2) < 1:
            raise ValueError("gc.threshold0/1/2 must be >= 1 (gc.enabled = false keeps the "
                             "defaults)")
