"""The sections of what users reach: the HTTP API, webhook delivery and the V3 surface."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from ..config_section import require


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
    #: GET /rwa, /rwa/{address}, /vaults and /vaults/{address} bodies are served from
    #: memory; the stores' versions are re-read at most this often, and a body built
    #: before a write is served for at most this long after the write was noticed
    #: (monitor/api/readcache.py): a store write shows in the API within twice this.
    #: 0: read it on every request.
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
    #: The worker's log sums up its automatic attempts per this interval: successes at
    #: debug, then one info line (webhook.delivered); per endpoint the first failure at
    #: warning in full, the rest at debug, then one warning (webhook.attempts_failed).
    #: 0: a line per attempt (a success at info, a failure at warning).
    attempt_log_seconds: float = 60.0

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
            (self.attempt_log_seconds >= 0, "attempt_log_seconds must be >= 0"),
        ]
        require("delivery", checks)


class V3Config(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The versioned surface (docs/v3.md). v2 deprecation headers start at ``ga_date``."""

    #: V3 general availability, ISO 8601 with a zone ("2027-01-01T00:00:00Z"). Unset: V3 is
    #: not GA and v2 responses carry no Deprecation/Sunset/Link headers.
    ga_date: Annotated[datetime, msgspec.Meta(tz=True)] | None = None
    #: v2 stops responding this many calendar months after GA (the spec's window: 9).
    sunset_months: int = 9
    #: Where the v2 -> v3 migration guide is published (the ``Link rel="deprecation"``).
    migration_guide_url: str = "docs/migration-v2-to-v3.md"
