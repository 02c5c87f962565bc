"""Schema of the webhook component (``schema_migrations`` line ``webhooks``).

Times are float epoch seconds (DOUBLE PRECISION on both backends); booleans are 0/1
INTEGERs; lists and filter objects are JSON text. That keeps every statement in the
subset SQLite and PostgreSQL share.
"""

from __future__ import annotations

from .db import Database, Migration, migrate

COMPONENT = "webhooks"

#: The due index of version 3: only rows a due read can return (next_attempt_at <= now
#: implies it on both dialects' planners).
_DUE_INDEX = ("CREATE INDEX webhook_deliveries_due ON webhook_deliveries"
              " (status, next_attempt_at) WHERE next_attempt_at IS NOT NULL")

_PG_V3 = f"""
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_subscription_id_event_id_key;
DROP INDEX webhook_deliveries_due;
ALTER TABLE webhook_attempts DROP CONSTRAINT webhook_attempts_delivery_id_fkey;
ALTER TABLE webhook_deliveries SET (fillfactor = 50);
{_DUE_INDEX}
"""

# SQLite cannot drop a table constraint: both tables are rebuilt (dropping the old
# deliveries table under the old attempts table's foreign key would fail the key check,
# and foreign_keys cannot be switched off inside the migration's transaction).
_SQLITE_V3 = f"""
CREATE TABLE webhook_deliveries_v3 (
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
  completed_at DOUBLE PRECISION
);
INSERT INTO webhook_deliveries_v3 (id, subscription_id, api_key_id, event_id, event_type,
  status, attempts, next_attempt_at, lease_until, lease_token, last_status_code, last_error,
  last_manual_retry_at, created_at, updated_at, completed_at)
  SELECT id, subscription_id, api_key_id, event_id, event_type, status, attempts,
  next_attempt_at, lease_until, lease_token, last_status_code, last_error,
  last_manual_retry_at, created_at, updated_at, completed_at FROM webhook_deliveries;
CREATE TABLE webhook_attempts_v3 (
  delivery_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  manual INTEGER NOT NULL,
  started_at DOUBLE PRECISION NOT NULL,
  status_code INTEGER,
  latency_ms DOUBLE PRECISION NOT NULL,
  error TEXT,
  PRIMARY KEY (delivery_id, attempt)
);
INSERT INTO webhook_attempts_v3 (delivery_id, attempt, manual, started_at, status_code,
  latency_ms, error) SELECT delivery_id, attempt, manual, started_at, status_code,
  latency_ms, error FROM webhook_attempts;
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
ALTER TABLE webhook_deliveries_v3 RENAME TO webhook_deliveries;
ALTER TABLE webhook_attempts_v3 RENAME TO webhook_attempts;
CREATE INDEX webhook_deliveries_owner ON webhook_deliveries (api_key_id, created_at);
{_DUE_INDEX}
"""

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
    # An outcome changes status and next_attempt_at, so its UPDATE is never a HOT update:
    # every index of the table gets an entry for the new row version. Two of them cost
    # per outcome and buy nothing: UNIQUE (subscription_id, event_id) repeats the primary
    # key (a delivery's id is the UUIDv5 of exactly that pair, deliveries.delivery_id,
    # and nothing inserts a delivery under another id), and the due index held every
    # finished delivery too, though a due read only ever asks for next_attempt_at <= now
    # (NULL once a delivery is finished). A finished delivery now writes two index
    # entries (primary key, owner) where it wrote four.
    # The history's foreign key to its delivery goes too: on PostgreSQL each history row
    # ran the key check (a query, and a row lock on the delivery: another WAL record)
    # inside the worker's cycle. Every history row is written by a statement that has
    # just updated its delivery under the claim (the cycle's RETURNING, or
    # begin_attempt/record_attempt in one transaction), and prune deletes a delivery's
    # history before the delivery, in one transaction.
    # PostgreSQL: fillfactor 70 -> 50. Each delivery makes two new row versions in
    # quick succession (claim, outcome), and at 70 only ~62 % of the claims found room
    # on their page for a HOT update; at 50 ~99 % do (bench_delivery, 20,000 drained).
    # The price: pages of new deliveries are filled to half, not to 70 %.
    Migration(3, "webhook_deliveries: no UNIQUE (subscription_id, event_id), partial due"
                 " index; webhook_attempts: no foreign key",
              {"postgresql": _PG_V3, "sqlite": _SQLITE_V3}),
    # A hanging endpoint's deliveries wait, due, while its slots are held: they are the
    # oldest rows of the due index, so the cycle's bounded walk finds only them. When it
    # stops at its bound without filling the claim, the cycle reads each subscription's
    # oldest due rows through this index instead (due_read, delivery_cycle_pg):
    # cost by subscriptions, not by backlog. Partial like the due index: a finished
    # delivery (next_attempt_at NULL) writes no entry, and a claim changes neither
    # column, so it stays a heap-only update on PostgreSQL.
    Migration(4, "webhook_deliveries: due index by subscription",
              "CREATE INDEX webhook_deliveries_subscription_due ON webhook_deliveries"
              " (subscription_id, next_attempt_at) WHERE next_attempt_at IS NOT NULL"),
]


async def migrate_webhooks(db: Database) -> int:
    return await migrate(db, COMPONENT, MIGRATIONS)
