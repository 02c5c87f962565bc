"""Schema of the webhook component (``schema_migrations`` line ``webhooks``).

Times are float epoch seconds (DOUBLE PRECISION on both backends); booleans are 0/1
INTEGERs; lists and filter objects are JSON text. That keeps every statement in the
subset SQLite and PostgreSQL share.
"""

from __future__ import annotations

from .db import Database, Migration, migrate

COMPONENT = "webhooks"

MIGRATIONS = [
    Migration(1, "api keys, subscriptions, events, deliveries, attempts, CU ledger", """
CREATE TABLE api_keys (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  key_hash TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL,
  created_at DOUBLE PRECISION NOT NULL,
  revoked_at DOUBLE PRECISION
);
CREATE TABLE webhook_subscriptions (
  id TEXT PRIMARY KEY,
  api_key_id TEXT NOT NULL REFERENCES api_keys (id),
  webhook_url TEXT NOT NULL,
  endpoint TEXT NOT NULL,
  event_types TEXT NOT NULL,
  filters TEXT NOT NULL,
  secret_sealed TEXT NOT NULL,
  previous_secret_sealed TEXT,
  rotated_at DOUBLE PRECISION,
  is_active INTEGER NOT NULL,
  created_at DOUBLE PRECISION NOT NULL,
  updated_at DOUBLE PRECISION NOT NULL,
  deleted_at DOUBLE PRECISION
);
CREATE INDEX webhook_subscriptions_owner ON webhook_subscriptions (api_key_id, created_at);
CREATE TABLE webhook_events (
  event_id TEXT PRIMARY KEY,
  event_type TEXT NOT NULL,
  payload TEXT NOT NULL,
  received_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE webhook_deliveries (
  id TEXT PRIMARY KEY,
  subscription_id TEXT NOT NULL REFERENCES webhook_subscriptions (id),
  api_key_id TEXT NOT NULL,
  event_id TEXT NOT NULL REFERENCES webhook_events (event_id),
  event_type TEXT NOT NULL,
  status TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  next_attempt_at DOUBLE PRECISION,
  lease_until DOUBLE PRECISION,
  lease_token TEXT,
  last_status_code INTEGER,
  last_error TEXT,
  last_manual_retry_at DOUBLE PRECISION,
  created_at DOUBLE PRECISION NOT NULL,
  updated_at DOUBLE PRECISION NOT NULL,
  completed_at DOUBLE PRECISION,
  UNIQUE (subscription_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_owner ON webhook_deliveries (api_key_id, created_at);
CREATE TABLE webhook_attempts (
  delivery_id TEXT NOT NULL REFERENCES webhook_deliveries (id),
  attempt INTEGER NOT NULL,
  manual INTEGER NOT NULL,
  started_at DOUBLE PRECISION NOT NULL,
  status_code INTEGER,
  latency_ms DOUBLE PRECISION NOT NULL,
  error TEXT,
  PRIMARY KEY (delivery_id, attempt)
);
CREATE TABLE cu_ledger (
  id TEXT PRIMARY KEY,
  api_key_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  ref TEXT NOT NULL,
  units INTEGER NOT NULL,
  created_at DOUBLE PRECISION NOT NULL,
  UNIQUE (kind, ref)
);
CREATE INDEX cu_ledger_owner ON cu_ledger (api_key_id, created_at);
"""),
    # The worker's claim UPDATE (lease, attempts, updated_at: no indexed column) can be a
    # heap-only tuple update, writing no index entries, only if the row's page has room
    # for the new version; at the default fillfactor 100 pages of freshly inserted
    # deliveries are full, so every claim wrote four index entries. Applies to pages
    # filled from now on.
    Migration(2, "webhook_deliveries fillfactor 70 (HOT claim updates)",
              "ALTER TABLE webhook_deliveries SET (fillfactor = 70)", dialect="postgresql"),
]


async def migrate_webhooks(db: Database) -> int:
    return await migrate(db, COMPONENT, MIGRATIONS)
