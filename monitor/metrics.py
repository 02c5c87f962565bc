"""Every Prometheus metric of depeg-monitor, declared once, here.

Other modules import these objects and update them; nothing else declares a metric (the
per-token gauges' collector is monitor/token_series.py; its instance is made here). Names
follow the Prometheus conventions: a ``depeg_`` namespace, base units (seconds, ratios),
``_total`` on counters, ``_seconds`` on duration histograms. Every label has a bounded value
set, listed beside the metric. No label carries a URL, an API key, a subscription id or a
token address -- except the per-token gauges (``depeg_token_*``), which exist so a dashboard
can plot any tracked token and are capped (:data:`TOKEN_SERIES_CAP`, config
``metrics.token_series_cap``): beyond the cap new tokens get no per-token series and
``depeg_token_series_dropped_total`` counts them (the aggregate metrics still include them).

Labelled series whose label values are known up front (tiers, tier pairs, delivery statuses,
attempt outcomes, dead-letter reasons, ...) are created at import with value 0, so a panel or
an alert that selects them sees a series from the first scrape instead of "no data".
See docs/metrics.md for the table, and the dashboards in grafana/ for how they are read.
"""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version
from typing import Final

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

from .records import Tier
from .ticks import BAD_TICK_REASONS

# Re-exported: the label values and the cap are this module's as much as the exporter's.
from .token_series import SIGNALS as SIGNALS
from .token_series import TIER_LEVEL as TIER_LEVEL
from .token_series import TOKEN_SERIES_CAP as TOKEN_SERIES_CAP
from .token_series import TokenSeries as TokenSeries
from .vaults.facts import BAD_FACT_REASONS

NS: Final = "depeg"

# ---- bounded label values -------------------------------------------------------------
TIERS: Final = tuple(t.value for t in Tier)
#: Components that consume a topic (label ``consumer``).
CONSUMERS: Final = ("monitor", "deliver", "store", "spread")
#: Kafka clients (label ``client``).
CLIENTS: Final = ("monitor", "deliver", "store", "producer")
#: What the monitor publishes (label ``kind``).
PUBLISH_KINDS: Final = ("tier_change", "rating", "dead_letter", "state", "spread")
#: BadTick reason codes (monitor/ticks.py) plus ``other`` for anything new.
DEAD_LETTER_REASONS: Final = (*BAD_TICK_REASONS, "other")
#: Delivery statuses of the spec (label ``status``).
DELIVERY_STATUSES: Final = ("pending", "success", "failed", "max_retries_exceeded")
#: Outcome of one HTTP delivery attempt (label ``outcome``); all but ``success`` are
#: endpoint failures.
ATTEMPT_OUTCOMES: Final = (
    "success", "http_4xx", "http_5xx", "timeout", "connection_error", "blocked",
)
#: What the store writer writes (label ``kind``).
STORE_KINDS: Final = ("rating", "tier_change", "vault_facts", "vault_rating")
#: What costs compute units (label ``kind``).
CU_KINDS: Final = ("delivery", "management", "query")
_LATENCY_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_API_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
_DELIVERY_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)

registry: CollectorRegistry = REGISTRY
# No ``*_created`` series: they double the series count and no dashboard reads them.
disable_created_metrics()  # type: ignore[no-untyped-call]

# ---- ingest (monitor) -------------------------------------------------------------------
#: Records read from the ticks topic, before decoding. Monitor, per record.
TICKS_CONSUMED = Counter(f"{NS}_ticks_consumed_total", "Records read from the ticks topic.")
#: Records decoded into a valid Tick and handed to the engine. Monitor.
TICKS_DECODED = Counter(f"{NS}_ticks_decoded_total", "Ticks decoded and given to the engine.")
#: Records sent to the dead-letter topic, by BadTick reason. Monitor, via dead_lettered().
TICKS_DEAD_LETTERED = Counter(
    f"{NS}_ticks_dead_lettered_total",
    "Tick records sent to the dead-letter topic, by reason.", ["reason"])
#: Ticks dropped because they arrived later than model.lateness_seconds. Monitor/engine stats.
TICKS_LATE = Counter(f"{NS}_ticks_late_total", "Ticks dropped for arriving too late.")
#: Wall-clock time of the last consumed tick record; "no ticks" alert. Monitor.
LAST_TICK_TIME = Gauge(
    f"{NS}_last_tick_timestamp_seconds", "Unix time (wall clock) the last tick was consumed.")
#: Records between the committed position and the end of each assigned partition.
#: The cross-chain spread stage (monitor/spread/service.py, docs/cross-chain-spread.md).
SPREAD_BOUNDARIES = Counter(
    f"{NS}_spread_boundaries_total",
    "Refresh boundaries the spread stage published (one observation per token of the asset).")
SPREAD_LATE = Counter(
    f"{NS}_spread_late_ticks_total",
    "Ticks at or before a boundary the spread stage had already published (not used).")
SPREAD_WAITING = Gauge(
    f"{NS}_spread_waiting_seconds",
    "Event time the newest tick of an asset is ahead of its last published spread boundary; "
    "grows while a chain holds the asset (and its gated tokens' ratings) up.", ["asset"])
SPREAD_GATES_OPENED = Counter(
    f"{NS}_spread_gates_opened_total",
    "Gated tokens the monitor rated without waiting for the spread stage any longer "
    "(spread.gate_timeout_seconds); nonzero means the stage is down or far behind.")
CONSUMER_LAG = Gauge(
    f"{NS}_consumer_lag_records",
    "Records not yet consumed per assigned partition (high watermark - position).",
    ["consumer", "partition"])
#: Monitor: records read past the group's committed offset, per assigned partition. The
#: offset trails the position until the tokens holding it back have their state written
#: (kafka.state_every_ticks / state_max_age_seconds, monitor/daemon/coverage.py): what a
#: kill -9 makes the next owner read (and publish) again. Not a backlog.
MONITOR_UNCOMMITTED = Gauge(
    f"{NS}_monitor_uncommitted_records",
    "Ticks records processed but not yet committed per assigned partition (read again "
    "after a crash; bounded by kafka.state_max_age_seconds).", ["partition"])
#: Partitions assigned to this process's consumer; readiness and scaling. Each consumer.
ASSIGNED_PARTITIONS = Gauge(
    f"{NS}_consumer_assigned_partitions", "Partitions currently assigned.", ["consumer"])
#: Records a consumer could not decode and skipped (the monitor dead-letters ticks instead).
RECORDS_UNDECODABLE = Counter(
    f"{NS}_records_undecodable_total",
    "Records of depeg.ratings / depeg.tier-changes a consumer could not decode and skipped.",
    ["consumer"])
#: Wall time to process one fetched batch, end to end (decode, engine, publish, commit).
BATCH_SECONDS = Histogram(
    f"{NS}_batch_processing_seconds", "Time to process one consumed batch.", ["consumer"],
    buckets=_LATENCY_BUCKETS)
#: Wall time of one wall-clock refresh sweep over quiet tokens. Monitor.
REFRESH_SECONDS = Histogram(
    f"{NS}_refresh_duration_seconds", "Time of one rating refresh sweep.",
    buckets=_LATENCY_BUCKETS)

# ---- ratings and tiers (monitor) --------------------------------------------------------
#: Tokens with state in this process's engine. Monitor.
TOKENS_TRACKED = Gauge(f"{NS}_tokens_tracked", "Tokens with rating state in this process.")
#: Tokens whose last tick is older than model.stale_after_seconds. Monitor.
TOKENS_STALE = Gauge(f"{NS}_tokens_stale", "Tracked tokens with no recent tick.")
#: Current tier distribution (all tokens, not capped). Monitor.
TOKENS_BY_TIER = Gauge(f"{NS}_tokens_by_tier", "Tracked tokens per current tier.", ["tier"])
#: Tier changes emitted, by old and new tier. Monitor, via tier_changed().
TIER_CHANGES = Counter(
    f"{NS}_tier_changes_total", "Tier changes emitted, by old and new tier.",
    ["old_tier", "new_tier"])
#: Records published by the monitor, by kind. Monitor, after the producer acknowledged.
EVENTS_PUBLISHED = Counter(
    f"{NS}_events_published_total", "Records published to Kafka, by kind.", ["kind"])
#: Publish failures (after the client's own retries), by kind. Monitor.
PUBLISH_ERRORS = Counter(
    f"{NS}_publish_errors_total", "Records that could not be published, by kind.", ["kind"])

# ---- per-token series (capped) ----------------------------------------------------------
#: Snapshots the per-token exporter did not keep: counted here, passed to it below.
TOKEN_SERIES_DROPPED = Counter(
    f"{NS}_token_series_dropped_total",
    "Snapshots not exported per token because the per-token series cap was reached.")
#: The process-wide per-token exporter (monitor/token_series.py); the monitor hands it
#: every RatingSnapshot it publishes. ``set_token_cap`` applies
#: ``metrics.token_series_cap``.
token_series = TokenSeries(TOKEN_SERIES_CAP, dropped=TOKEN_SERIES_DROPPED)
REGISTRY.register(token_series)

# ---- delivery (consumers/delivery) ------------------------------------------------------
#: Delivery records entering a status: pending when created, failed when an attempt fails
#: and a retry is scheduled, then success or max_retries_exceeded.
DELIVERIES = Counter(
    f"{NS}_deliveries_total", "Delivery records entering a status.", ["status"])
#: Webhook POSTs in flight now: the worker's dispatcher sets it once per cycle, a send from
#: the API (a test delivery) counts itself in and out.
DELIVERIES_IN_FLIGHT = Gauge(f"{NS}_delivery_in_flight", "Webhook POSTs in flight.")
#: HTTP delivery attempts by outcome; everything but success is an endpoint failure.
DELIVERY_ATTEMPTS = Counter(
    f"{NS}_delivery_attempts_total", "Webhook POST attempts, by outcome.", ["outcome"])
#: Retries put on the schedule after a failed attempt.
RETRIES_SCHEDULED = Counter(
    f"{NS}_delivery_retries_scheduled_total", "Delivery retries scheduled after a failure.")
#: Deliveries waiting for their next attempt (retry backlog).
RETRY_BACKLOG = Gauge(
    f"{NS}_delivery_retry_backlog", "Deliveries waiting for a scheduled retry.")
#: Duration of one HTTP attempt (request sent to response or failure).
ATTEMPT_SECONDS = Histogram(
    f"{NS}_delivery_attempt_duration_seconds", "Duration of one webhook POST attempt.",
    buckets=_LATENCY_BUCKETS)
#: From the event being consumed to its successful delivery (includes retries).
DELIVERY_LATENCY = Histogram(
    f"{NS}_delivery_latency_seconds", "Time from event consumed to successful delivery.",
    buckets=_DELIVERY_BUCKETS)
#: Distinct endpoints (subscriptions) whose latest attempt failed. No URL label, by design.
FAILING_ENDPOINTS = Gauge(
    f"{NS}_delivery_failing_endpoints", "Subscriptions whose latest delivery attempt failed.")
#: Receivers (scheme://host:port) this worker probes: one send at a time, behind every
#: other endpoint's (monitor/webhooks/probe.py). Per worker, set once per cycle.
PROBED_ENDPOINTS = Gauge(
    f"{NS}_delivery_probed_endpoints",
    "Receivers this worker sends one request at a time (a send failed, not enough "
    "successes in a row since).")

# ---- store writer (consumers/store_writer) ----------------------------------------------
STORE_WRITES = Counter(f"{NS}_store_writes_total", "Rows written to the store.", ["kind"])
STORE_WRITE_SECONDS = Histogram(
    f"{NS}_store_write_duration_seconds", "Time of one store write (one batch).", ["kind"],
    buckets=_LATENCY_BUCKETS)
STORE_WRITE_ERRORS = Counter(
    f"{NS}_store_write_errors_total", "Store writes that failed.", ["kind"])
#: Rated vaults in the store (what E4 lists), by tier and verdict. Store writer.
STORED_VAULTS = Gauge(
    f"{NS}_store_vaults", "Rated vaults in the store, by tier and listing verdict.",
    ["tier", "verdict"])

# ---- HTTP API ---------------------------------------------------------------------------
#: route = the matched route template (``/rwa/{address}``) or ``unmatched``; bounded.
API_REQUESTS = Counter(
    f"{NS}_api_requests_total", "HTTP API requests, by route template, method and status.",
    ["route", "method", "status"])
API_SECONDS = Histogram(
    f"{NS}_api_request_duration_seconds", "HTTP API request duration.", ["route", "method"],
    buckets=_API_BUCKETS)
#: Compute units charged to API keys (1 per delivery, per management call, per E3/E8 call).
CU_CONSUMED = Counter(f"{NS}_cu_consumed_total", "Compute units charged, by kind.", ["kind"])

# ---- vaults (vault daemon) --------------------------------------------------------------
#: Fact records read from vaults.facts, by result: decoded (given to the engine) or
#: dead_lettered (sent to vaults.facts.dlq). Vault daemon.
VAULT_FACTS = Counter(
    f"{NS}_vault_facts_total", "Vault fact records consumed, by result.", ["result"])
#: Fact records dead-lettered, by BadFacts reason (bounded: monitor.vaults.facts).
VAULT_FACTS_DEAD_LETTERED = Counter(
    f"{NS}_vault_facts_dead_lettered_total",
    "Vault fact records sent to the dead-letter topic, by reason.", ["reason"])
#: Depeg tier changes the vault daemon applied (new) or ignored (duplicate, undecodable).
VAULT_DEPEG_CHANGES = Counter(
    f"{NS}_vault_depeg_changes_total",
    "depeg.tier-changes records read by the vault daemon, by result.", ["result"])
#: vaults.ratings records written (each is a change of a vault). Vault daemon.
VAULT_RATINGS = Counter(f"{NS}_vault_ratings_total", "vaults.ratings records written.")
#: Current distribution of the vaults this process rates (all of them, not capped).
VAULTS_BY_TIER = Gauge(f"{NS}_vaults_by_tier", "Rated vaults per current tier.", ["tier"])
VAULTS_BY_VERDICT = Gauge(
    f"{NS}_vaults_by_verdict", "Rated vaults per current listing verdict.", ["verdict"])
VAULTS_ATTENTION = Gauge(f"{NS}_vaults_attention_needed", "Vaults flagged attention_needed.")
#: Event time of the newest vault fact consumed; "no facts" alert. Vault daemon.
VAULT_LAST_FACT_TIME = Gauge(
    f"{NS}_vault_last_fact_timestamp_seconds", "Unix time (wall clock) the last fact was read.")

VAULT_TIERS: Final = ("critical", "high", "medium", "low", "unknown")
VAULT_VERDICTS: Final = ("do_not_list", "review_required", "caution", "safe_to_list")


def set_vault_counts(tiers: dict[str, int], verdicts: dict[str, int], attention: int) -> None:
    """Set the vault tier and verdict distributions at once (missing ones become 0)."""
    for tier in VAULT_TIERS:
        VAULTS_BY_TIER.labels(tier).set(tiers.get(tier, 0))
    for verdict in VAULT_VERDICTS:
        VAULTS_BY_VERDICT.labels(verdict).set(verdicts.get(verdict, 0))
    VAULTS_ATTENTION.set(attention)


# ---- producers, broker, build -----------------------------------------------------------
#: Ticks a producer sent, by source (simulate, file, or a feed name: bounded by the code).
PRODUCER_TICKS = Counter(
    f"{NS}_producer_ticks_sent_total", "Ticks sent by a producer, by source.", ["source"])
PRODUCER_ERRORS = Counter(
    f"{NS}_producer_errors_total", "Producer fetch or send failures, by source.", ["source"])
#: 1 while the client's last broker call succeeded, 0 after a failure. Each Kafka client.
BROKER_CONNECTED = Gauge(
    f"{NS}_broker_connected", "1 if the Kafka client reaches the broker, else 0.", ["client"])
# ---- on-chain sources (producers/rpc.py, producers/chainsvc.py) ----------------------------
# ``endpoint`` is "{chain}#{index}" (position in chains.<chain>.rpc_urls), never the URL:
# RPC URLs often carry an API key.
RPC_CALLS = Counter(
    f"{NS}_rpc_calls_total", "JSON-RPC calls sent (a batch counts each call).",
    ["chain", "endpoint"])
RPC_ERRORS = Counter(
    f"{NS}_rpc_errors_total", "JSON-RPC request failures, by kind (timeout, http, transport, "
    "rpc, lagging).", ["chain", "endpoint", "kind"])
RPC_SECONDS = Histogram(
    f"{NS}_rpc_request_seconds", "Time per JSON-RPC HTTP request (single or batch).",
    ["chain", "endpoint"], buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
RPC_FAILOVERS = Counter(
    f"{NS}_rpc_failovers_total", "Requests moved to another endpoint of the chain.", ["chain"])
RPC_HEAD_BLOCK = Gauge(
    f"{NS}_rpc_head_block", "Latest block an endpoint reported.", ["chain", "endpoint"])
#: Unix time of a source's last successful poll; source = "{chain}:{adapter}" (config-bounded).
SOURCE_LAST_POLL = Gauge(
    f"{NS}_source_last_success_timestamp_seconds",
    "When an on-chain source last completed a poll.", ["source"])
ORACLE_STALE_FEEDS = Gauge(
    f"{NS}_oracle_stale_feeds", "Oracle feeds past their heartbeat at the last poll.", ["chain"])
SOURCE_POLL_FAILURES = Counter(
    f"{NS}_source_poll_failures_total", "On-chain source polls that failed.", ["source"])
BUILD_INFO = Gauge(
    f"{NS}_build_info", "Always 1; labels carry the version.", ["version", "python"])


# ---- helpers: the few updates that need a rule ------------------------------------------
def dead_lettered(reason: str) -> None:
    """Count a dead-lettered record; an unknown reason code becomes ``other`` (bounded)."""
    TICKS_DEAD_LETTERED.labels(reason if reason in DEAD_LETTER_REASONS else "other").inc()


def consumer_progress(consumer: str, assigned: int, lag: dict[int, int],
                      batch_seconds: float | None, connected: bool) -> None:
    """One consumer group member after a fetch: partitions held, records behind per
    partition (summed over its topics), batch time and whether the broker answered."""
    ASSIGNED_PARTITIONS.labels(consumer).set(assigned)
    for partition, records in lag.items():
        CONSUMER_LAG.labels(consumer, str(partition)).set(records)
    if batch_seconds is not None:
        BATCH_SECONDS.labels(consumer).observe(batch_seconds)
    BROKER_CONNECTED.labels(consumer).set(1 if connected else 0)


def tier_changed(old_tier: str, new_tier: str) -> None:
    """Count one emitted tier change."""
    if old_tier in TIERS and new_tier in TIERS:
        TIER_CHANGES.labels(old_tier, new_tier).inc()


def set_tier_counts(counts: dict[str, int]) -> None:
    """Set the whole tier distribution at once (tiers missing from ``counts`` become 0)."""
    for tier in TIERS:
        TOKENS_BY_TIER.labels(tier).set(counts.get(tier, 0))


def set_stored_vaults(counts: list[tuple[str, str, int]]) -> None:
    """Set the whole (tier, verdict) distribution of stored vaults; missing pairs are 0."""
    seen = {(tier, verdict): n for tier, verdict, n in counts}
    for tier in VAULT_TIERS:
        for verdict in VAULT_VERDICTS:
            STORED_VAULTS.labels(tier, verdict).set(seen.get((tier, verdict), 0))


def api_request(route: str, method: str, status: int, seconds: float) -> None:
    API_REQUESTS.labels(route, method, str(status)).inc()
    API_SECONDS.labels(route, method).observe(seconds)


def set_token_cap(cap: int) -> None:
    token_series.cap = cap


def _package_version() -> str:
    try:
        return version("depeg-monitor")
    except PackageNotFoundError:
        return "unknown"


def _init() -> None:
    """Create every labelled series with known label values at 0 (see module docstring)."""
    BUILD_INFO.labels(_package_version(), platform.python_version()).set(1)
    for reason in DEAD_LETTER_REASONS:
        TICKS_DEAD_LETTERED.labels(reason)
    set_tier_counts({})
    for old in TIERS:
        for new in TIERS:
            if old != new:
                TIER_CHANGES.labels(old, new)
    for kind in PUBLISH_KINDS:
        EVENTS_PUBLISHED.labels(kind)
        PUBLISH_ERRORS.labels(kind)
    for status in DELIVERY_STATUSES:
        DELIVERIES.labels(status)
    for outcome in ATTEMPT_OUTCOMES:
        DELIVERY_ATTEMPTS.labels(outcome)
    for kind in STORE_KINDS:
        STORE_WRITES.labels(kind)
        STORE_WRITE_ERRORS.labels(kind)
        STORE_WRITE_SECONDS.labels(kind)
    for kind in CU_KINDS:
        CU_CONSUMED.labels(kind)
    set_stored_vaults([])
    set_vault_counts({}, {}, 0)
    for result in ("decoded", "dead_lettered"):
        VAULT_FACTS.labels(result)
    for reason in BAD_FACT_REASONS:
        VAULT_FACTS_DEAD_LETTERED.labels(reason)
    for result in ("applied", "duplicate", "undecodable"):
        VAULT_DEPEG_CHANGES.labels(result)
    for consumer in ("deliver", "store"):
        RECORDS_UNDECODABLE.labels(consumer)


_init()
