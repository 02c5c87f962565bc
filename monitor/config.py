"""One configuration for every process: a TOML file, then environment variables on top.

Environment variables are ``DEPEG_<SECTION>__<FIELD>`` (for example
``DEPEG_KAFKA__BOOTSTRAP_SERVERS=broker:9092`` or ``DEPEG_MODEL__REFRESH_SECONDS=60``).
Values are validated once, here, into typed structs; a wrong value stops start-up with a
message that names the field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from .vaults.config import VaultsConfig

ENV_PREFIX = "DEPEG_"
CONFIG_ENV = "DEPEG_CONFIG"


class Weights(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Signal weights in percent (the spec's defaults). Missing signals renormalise."""

    price_deviation: float = 30.0
    slippage: float = 20.0
    persistence_50bp: float = 18.0
    persistence_100bp: float = 12.0
    volatility_burst: float = 10.0
    headroom: float = 10.0


class ModelConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Every constant of the rating model; README "The rating model" explains each choice."""

    weights: Weights = Weights()
    #: Width of one window bucket. Windows are rings of buckets, not lists of ticks.
    bucket_seconds: int = 60
    #: Price deviation is the time-weighted mean of (price - peg) / peg over this window.
    deviation_window_seconds: int = 300
    #: Downside deviation (fraction) that gives the full price signal: 5 %.
    deviation_full: float = 0.05
    #: Persistence: time below peg by more than these fractions, over the last hour.
    persistence_window_seconds: int = 3600
    persistence_low: float = 0.005
    persistence_high: float = 0.010
    #: Slippage of a 100k USD sell: no signal at or below ``floor``, full at ``full``.
    slippage_floor_bps: float = 10.0
    slippage_full_bps: float = 200.0
    #: A slippage observation older than this no longer counts as observed.
    slippage_max_age_seconds: int = 3600
    #: Volatility burst: realised variance over the recent window against an exponentially
    #: decayed baseline; no signal below ``burst_start`` x baseline volatility, full at
    #: ``burst_full`` x. ``volatility_floor`` (per-minute return std) keeps a flat feed from
    #: turning a 1 bp wiggle into a burst.
    volatility_window_seconds: int = 900
    volatility_baseline_seconds: int = 21600
    burst_start: float = 2.0
    burst_full: float = 4.0
    volatility_floor: float = 0.0005
    #: Headroom: oracle divergence |price - oracle| / peg that gives the full signal.
    oracle_divergence_full: float = 0.02
    oracle_max_age_seconds: int = 3600
    #: Headroom: cross-chain spread (max - min of price/peg over the asset's chains) that
    #: gives the full signal, and how long a spread observation counts (docs/cross-chain-spread.md).
    cross_chain_spread_full: float = 0.02
    cross_chain_spread_max_age_seconds: int = 900
    #: Tier bands on the 0-100 rating (spec: critical >= 80, warning 60-79, watch 40-59).
    #: The published tier is always the band of the published rating (premium aside).
    watch_at: float = 40.0
    warning_at: float = 60.0
    critical_at: float = 80.0
    #: Premium (the above-peg state, shown instead of ok): the 5-minute deviation must be
    #: at least this far above peg (a token at 1.0001 is not premium) and falls back once
    #: it is below ``premium_exit`` ...
    premium_enter: float = 0.005
    premium_exit: float = 0.0025
    #: ... and only after at least this many whole minutes of the last hour more than
    #: ``premium_enter`` above peg (one oracle round at 1.006 is not a premium).
    premium_minutes: int = 60
    #: Anti-flapping lives in the published rating: it is the highest of the raw rating,
    #: the hard floors and the previous published rating decayed linearly. While the token
    #: is under stress the decay is ``hold_decay_per_hour`` points an hour and stops at the
    #: lower edge of the current band as long as the raw rating is within ``hold_margin``
    #: points of that edge; once the price has not been more than ``persistence_low``
    #: below peg for ``calm_window_seconds`` (calm) it decays at ``calm_decay_per_hour``
    #: with no stop, so 100 falls below 40 in 1.5 hours: the all-clear.
    hold_decay_per_hour: float = 10.0
    hold_margin: float = 20.0
    hold_seconds: int = 3600
    calm_window_seconds: int = 900
    calm_decay_per_hour: float = 40.0
    #: Hard floors (monotone in evidence): a token whose price spent at least
    #: ``floor_<tier>_minutes`` whole minutes of the last ``floor_window_seconds`` more than
    #: ``floor_<tier>_below`` below peg is rated at least at that tier's band, whatever the
    #: other signals say. 0 minutes switches a floor off.
    floor_window_seconds: int = 3600
    floor_critical_below: float = 0.05
    floor_critical_minutes: int = 30
    floor_warning_below: float = 0.02
    floor_warning_minutes: int = 45
    floor_watch_below: float = 0.01
    floor_watch_minutes: int = 30
    #: A rating refresh every this many seconds of event time (aligned to the epoch).
    #: 0 means refresh on every tick.
    refresh_seconds: int = 300
    #: Rating snapshots are published at the first refresh of each period of this many
    #: seconds of event time (aligned to the epoch) per token, instead of at every refresh;
    #: tier changes are still evaluated (and published) at every refresh. 0: a snapshot at
    #: every refresh. Replay honours it too, so the daemon still equals replay.
    snapshot_seconds: int = 0
    #: Ticks may arrive this late (event time) and still be placed in order; later ones are
    #: dropped and counted.
    lateness_seconds: int = 120
    #: A tick dated more than this far ahead of the wall clock (and of its token's newest
    #: tick) is refused as ``future_ts`` (monitor/timesanity.py).
    future_tolerance_seconds: int = 300
    #: A token with no tick for this long (event time at refresh) is reported stale.
    stale_after_seconds: int = 900

    def __post_init__(self) -> None:
        floors = [(self.floor_critical_below, self.floor_critical_minutes),
                  (self.floor_warning_below, self.floor_warning_minutes),
                  (self.floor_watch_below, self.floor_watch_minutes)]
        checks = [
            (0 < self.watch_at <= self.warning_at <= self.critical_at <= 100,
             "need 0 < watch_at <= warning_at <= critical_at <= 100"),
            (self.hold_decay_per_hour > 0 and self.calm_decay_per_hour > 0,
             "hold_decay_per_hour and calm_decay_per_hour must be > 0 (else a tier never "
             "steps down)"),
            (0 <= self.premium_minutes <= 60, "premium_minutes must be within 0-60"),
            (self.snapshot_seconds >= 0, "snapshot_seconds must be >= 0"),
            (self.hold_margin >= 0 and self.hold_seconds >= 0,
             "hold_margin and hold_seconds must be >= 0"),
            (self.floor_window_seconds >= self.bucket_seconds > 0,
             "need floor_window_seconds >= bucket_seconds > 0"),
            (all(below > 0 and 0 <= minutes * 60 <= self.floor_window_seconds
                 for below, minutes in floors),
             "floor_*_below must be > 0 and floor_*_minutes within floor_window_seconds"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"model.{message}")


class KafkaConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    #: Empty: ``run`` starts the embedded Tansu broker on loopback.
    bootstrap_servers: str = ""
    ticks_topic: str = "depeg.ticks"
    ratings_topic: str = "depeg.ratings"
    tier_changes_topic: str = "depeg.tier-changes"
    dlq_topic: str = "depeg.ticks.dlq"
    #: Compacted: the latest engine state of each token, keyed ``chain:token``, written to
    #: the same partition number as the token's ticks (so it needs >= ``partitions``).
    state_topic: str = "depeg.monitor-state"
    #: Partitions of every topic the monitor creates; the unit of scale-out.
    partitions: int = 8
    replication_factor: int = 1
    #: Create missing topics at start (idempotent). Off when topics are managed elsewhere.
    create_topics: bool = True
    client_id: str = "depeg-monitor"
    monitor_group: str = "depeg-monitor"
    delivery_group: str = "depeg-delivery"
    store_group: str = "depeg-store"
    #: One batch = at most this many tick records, or what arrived within the timeout.
    batch_max_records: int = 2000
    batch_timeout_ms: int = 200
    #: Producer acknowledgements: "all" (default), "1" or "0". Never idempotent: the
    #: embedded broker refuses InitProducerId.
    acks: str = "all"
    #: Compression of every record batch this service produces: "zstd" (default), "lz4",
    #: "snappy", "gzip" or "none". Rating snapshots and state records are JSON that zstd
    #: shrinks ~8x; every current Kafka client reads zstd batches (Kafka >= 2.1, librdkafka
    #: >= 1.0; Python clients need cramjam, as aiokafka here does). "none" for a consumer
    #: that cannot decompress.
    compression: Literal["zstd", "lz4", "snappy", "gzip", "none"] = "zstd"
    linger_ms: int = 5
    #: Largest record batch the producer builds per partition. A whole fetched batch's
    #: outputs fit in one (at 16 KB, aiokafka's default, the loop waited for a broker
    #: round trip every ~8 rating snapshots per partition). Keep it within the broker's
    #: message.max.bytes (Kafka's default: 1 MB).
    producer_batch_bytes: int = 524288
    request_timeout_ms: int = 30000
    session_timeout_ms: int = 10000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    #: Port of the embedded broker ``run`` starts. Fixed, so a demo's second terminal
    #: (``produce``, ``status``) knows it; not 9092, which a real Kafka on the same machine
    #: may hold. 0 = any free port (tests); the run state file records the real one.
    embedded_port: int = 19092
    #: A dead-lettered record keeps at most this many bytes of the original value.
    dlq_value_prefix_bytes: int = 1024
    #: Broker failures are retried forever with exponential backoff between these bounds.
    retry_backoff_seconds: float = 0.5
    retry_backoff_max_seconds: float = 10.0
    #: The monitor reports not ready when a batch has been stuck this long.
    ready_stall_seconds: float = 15.0
    #: /healthz fails (the process is stuck, not just waiting) when the monitor loop has
    #: not started an iteration for this long: a hung rebalance, restore or publish.
    liveness_stall_seconds: float = 300.0
    #: Token states are written to the state topic, and offsets committed after them, at
    #: most this often (wall clock); also on partition revocation and shutdown. Outputs are
    #: published every batch regardless; a crash re-produces what came after the commit
    #: (see ``state_max_age_seconds``).
    checkpoint_interval_seconds: float = 5.0
    #: A monitor checkpoint writes a token's state (a ~1.8 KB ring, rewritten whole) only
    #: when it is due: this many ticks since its last written state, or
    #: ``state_max_age_seconds`` (wall clock) since the first of them; every changed token
    #: on revocation and shutdown (the vault daemon writes at every checkpoint). The
    #: committed offset stops at the first tick no written state holds, so a kill -9
    #: re-reads (and re-publishes, byte-identical) up to that much of a partition. Lower
    #: both for shorter re-reads, at the price of state bytes: at one tick per token per
    #: minute, 900 s keeps the state and ratings topics under the ticks topic's bytes
    #: (docs/recovery.md, "Cadences").
    state_every_ticks: int = 32
    state_max_age_seconds: float = 900.0
    #: How often (wall clock) quiet tokens are checked for a live-clock refresh.
    live_clock_interval_seconds: float = 10.0
    #: On SIGTERM, give an in-flight batch this long to publish and commit.
    shutdown_grace_seconds: float = 30.0

    def __post_init__(self) -> None:
        if self.state_every_ticks < 1 or self.state_max_age_seconds < 0:
            raise ValueError("kafka.state_every_ticks must be >= 1 and "
                             "state_max_age_seconds >= 0")


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


class KeyRateLimit(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One API key's own limits (``[api.key_rate_limits.<key name, id or prefix>]``);
    an unset field keeps the default."""

    per_second: float | None = None
    burst: int | None = None
    max_concurrent_test_sends: int | None = None


class ApiConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    host: str = "127.0.0.1"
    port: int = 8080
    max_body_bytes: int = 65536
    #: Token bucket per API key on every authenticated route (monitor/api/ratelimit.py):
    #: ``rate_limit_burst`` requests at once, refilled at ``rate_limit_per_second``; over
    #: it, 429 with Retry-After. 0 per second: no limit.
    rate_limit_per_second: float = 50.0
    rate_limit_burst: int = 100
    #: E12 test sends (each waits for the receiver) in flight at once per API key.
    max_concurrent_test_sends: int = 2
    #: Per-key overrides, keyed by the key's name, id or display prefix (dpm_xxxxxxxx).
    key_rate_limits: dict[str, KeyRateLimit] = msgspec.field(default_factory=dict)
    #: A valid API key is accepted without a database lookup for this long after one
    #: found it (monitor/api/keycache.py): the bound on how long a revoked or rotated-out
    #: key keeps working. 0: look the key up on every request.
    key_cache_seconds: float = 1.0
    #: GET /rwa and /rwa/{address} bodies are served from memory; the ratings store's
    #: version is re-read at most this often, and a body built before a write is served
    #: for at most this long after the write was noticed (monitor/api/rwa/cache.py): a
    #: store write shows in the API within twice this. 0: read it on every request.
    ratings_check_seconds: float = 0.05
    #: Failed authentications (401) per client address (monitor/api/authlimit.py):
    #: ``failed_auth_burst`` at once, refilled at ``failed_auth_per_second``; beyond it
    #: every keyed request from the address is 429 with Retry-After until a token is back,
    #: so keys cannot be guessed at line rate. 0 per second: no limit.
    failed_auth_per_second: float = 10.0
    failed_auth_burst: int = 20

    def __post_init__(self) -> None:
        if self.rate_limit_per_second < 0 or self.rate_limit_burst < 0:
            raise ValueError("api.rate_limit_per_second and rate_limit_burst must be >= 0")
        if self.key_cache_seconds < 0 or self.ratings_check_seconds < 0:
            raise ValueError("api.key_cache_seconds and ratings_check_seconds must be >= 0")
        if self.failed_auth_per_second < 0 or self.failed_auth_burst < 0:
            raise ValueError("api.failed_auth_per_second and failed_auth_burst must be >= 0")
        if self.max_concurrent_test_sends < 1:
            raise ValueError("api.max_concurrent_test_sends must be >= 1")


class DeliveryConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Webhook delivery (docs/webhooks.md). The spec fixes 5 attempts; the timeout and the
    backoff are ours: 30 s, 60 s, 120 s, 240 s between attempts rides out a receiver's
    few-minute deploy or restart before a delivery gives up."""

    max_attempts: int = 5
    timeout_seconds: float = 10.0
    backoff_base_seconds: float = 30.0
    backoff_max_seconds: float = 1800.0
    max_concurrency: int = 64
    per_endpoint_concurrency: int = 4
    #: Development only: allow http:// and loopback receivers. Loud in the logs when on.
    allow_loopback: bool = False
    #: Random jitter: each backoff delay is scaled by a factor in [1 - jitter, 1 + jitter].
    backoff_jitter: float = 0.2
    #: How often the worker looks for due retries when nothing wakes it earlier.
    poll_interval_seconds: float = 1.0
    #: Subscription secrets are stored AES-GCM encrypted with this key (32 bytes, base64;
    #: set it through DEPEG_DELIVERY__SECRET_ENCRYPTION_KEY). Empty: use ``secret_key_file``.
    secret_encryption_key: str = ""
    #: Key file created (mode 0600) on first use when no key is configured. Empty:
    #: ``secret-key`` in the data directory (storage.data_dir).
    secret_key_file: str = ""
    #: A claimed delivery's lease is timeout_seconds plus this margin (the worker claims
    #: up to three sends ahead per slot: 4 x timeout_seconds plus it), so a live sender
    #: never loses its claim; a crashed sender's deliveries are retried after it.
    lease_margin_seconds: float = 30.0
    #: E15: a delivery may be re-sent by hand at most once per this many seconds.
    manual_retry_interval_seconds: float = 300.0
    #: E13: the previous secret keeps signing (X-Webhook-Previous-Signature) this long.
    previous_secret_seconds: float = 86400.0
    #: Finished deliveries (and their attempts and events) older than this are deleted by
    #: the worker, hourly. The CU ledger is kept. 0 keeps everything.
    history_retention_days: int = 30

    def __post_init__(self) -> None:
        checks = [
            (self.max_attempts >= 1, "max_attempts must be >= 1"),
            (self.timeout_seconds > 0, "timeout_seconds must be > 0"),
            (0 <= self.backoff_base_seconds <= self.backoff_max_seconds,
             "need 0 <= backoff_base_seconds <= backoff_max_seconds"),
            (0 <= self.backoff_jitter < 1, "backoff_jitter must be in [0, 1)"),
            (self.max_concurrency >= 1, "max_concurrency must be >= 1"),
            (self.per_endpoint_concurrency >= 1, "per_endpoint_concurrency must be >= 1"),
            (self.poll_interval_seconds > 0, "poll_interval_seconds must be > 0"),
            (self.lease_margin_seconds >= 0, "lease_margin_seconds must be >= 0"),
            (self.manual_retry_interval_seconds >= 0,
             "manual_retry_interval_seconds must be >= 0"),
            (self.previous_secret_seconds >= 0, "previous_secret_seconds must be >= 0"),
            (self.history_retention_days >= 0, "history_retention_days must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"delivery.{message}")


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


class RegistryConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    #: TOML file listing tracked tokens; empty for none.
    path: str = ""


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


class ChainConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One chain's RPC access for the on-chain adapters (producers/chainsvc.py)."""

    #: Endpoints in priority order; a TOML list, or one string of comma-separated URLs (env).
    #: Empty: the chain is not polled.
    rpc_urls: list[str] | str = []
    poll_interval_seconds: float = 30.0
    #: Reads happen this many blocks behind the best head (reorg safety).
    confirmations: int = 2
    timeout_seconds: float = 10.0
    #: Rounds over all endpoints before a poll's request fails.
    retries: int = 2
    #: Requests per second per endpoint (0 = unlimited).
    rate_limit: float = 25.0
    #: An endpoint this many blocks behind the best head is skipped (lagging node).
    max_lag_blocks: int = 5

    @property
    def urls(self) -> list[str]:
        raw = self.rpc_urls.split(",") if isinstance(self.rpc_urls, str) else self.rpc_urls
        return [u.strip() for u in raw if u.strip()]


class ChainsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The on-chain adapters: a section per chain plus what to watch (docs/chain-adapters.md)."""

    eth: ChainConfig = ChainConfig()
    arb: ChainConfig = ChainConfig()
    pol: ChainConfig = ChainConfig()
    opt: ChainConfig = ChainConfig()
    base: ChainConfig = ChainConfig()
    bsc: ChainConfig = ChainConfig()
    linea: ChainConfig = ChainConfig()
    #: Token List whose extensions.sources name feeds, pools and vaults to poll; empty: the
    #: registry file (registry.path) when it is a .json Token List.
    tokens_file: str = ""
    #: JSON array of vaults to index: {"chain", "vault", ...off-chain facts}; empty: none.
    vaults_file: str = ""
    #: A feed whose last update is older than this is stale: no oracle price is published.
    oracle_heartbeat_seconds: float = 90000.0
    #: /readyz fails for a chain whose last successful poll is this many intervals old.
    stale_after_polls: float = 3.0

    def chain(self, name: str) -> ChainConfig:
        value: ChainConfig = getattr(self, name)
        return value


class V3Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The versioned surface (docs/v3.md). v2 deprecation headers start at ``ga_date``."""

    #: V3 general availability, ISO 8601 with a zone ("2027-01-01T00:00:00Z"). Unset: V3 is
    #: not GA and v2 responses carry no Deprecation/Sunset/Link headers.
    ga_date: Annotated[datetime, msgspec.Meta(tz=True)] | None = None
    #: v2 stops responding this many calendar months after GA (the spec's window: 9).
    sunset_months: int = 9
    #: Where the v2 -> v3 migration guide is published (the ``Link rel="deprecation"``).
    migration_guide_url: str = "docs/migration-v2-to-v3.md"


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


class Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    model: ModelConfig = ModelConfig()
    kafka: KafkaConfig = KafkaConfig()
    storage: StorageConfig = StorageConfig()
    api: ApiConfig = ApiConfig()
    delivery: DeliveryConfig = DeliveryConfig()
    logging: LoggingConfig = LoggingConfig()
    metrics: MetricsConfig = MetricsConfig()
    registry: RegistryConfig = RegistryConfig()
    chains: ChainsConfig = ChainsConfig()
    v3: V3Config = V3Config()
    #: The vault side: tag thresholds, rating, verdict, topics (monitor/vaults/config.py).
    vaults: VaultsConfig = VaultsConfig()
    spread: SpreadConfig = SpreadConfig()
    gc: GcConfig = GcConfig()


class ConfigError(ValueError):
    pass


def _set_path(tree: dict[str, Any], path: list[str], value: str) -> None:
    node = tree
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{'.'.join(path)}: {part} is not a section")
        node = child
    node[path[-1]] = value


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None,
                data_dir: str | None = None) -> Config:
    """File (argument, else ``$DEPEG_CONFIG``, else none) plus ``DEPEG_*`` variables, then
    ``data_dir`` (the ``--data-dir`` option) on top; runtime paths resolved
    (:func:`monitor.paths.resolve_paths`)."""
    from .paths import resolve_paths

    env = os.environ if env is None else env
    tree: dict[str, Any] = {}
    path = path or env.get(CONFIG_ENV) or None
    if path:
        import tomllib  # only with a file: its import (regexes compiled) is a few ms

        try:
            tree = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from None
    for name, value in env.items():
        if name.startswith(ENV_PREFIX) and "__" in name:
            parts = [p.lower() for p in name[len(ENV_PREFIX):].split("__")]
            _set_path(tree, parts, value)
    if data_dir:
        _set_path(tree, ["storage", "data_dir"], data_dir)
    if not tree:
        # No file and no variables (a replay's usual start): the defaults, which is what
        # converting {} gives (tests/test_config.py), without msgspec first building its
        # converter for every section (~2.5 ms of CPU).
        return resolve_paths(Config(), env)
    try:
        # strict=False lets environment strings become ints, floats and booleans.
        config = msgspec.convert(tree, Config, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid configuration: {exc}") from None
    return resolve_paths(config, env)


def to_toml_comments() -> str:
    """The defaults as a commented TOML document, for ``depeg-monitor config --defaults``
    (generated from this module's field comments: monitor/config_doc.py)."""
    from .config_doc import render

    return render()
