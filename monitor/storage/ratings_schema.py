"""Tables of the "ratings" component (its own migration line in ``schema_migrations``).

Times are stored twice where they are read back: ``ts`` as epoch seconds (DOUBLE PRECISION,
for ranges and ordering, identical on both databases) and the ISO text as published.
"""

from __future__ import annotations

from .db import Migration

COMPONENT = "ratings"

_V1 = """
CREATE TABLE rating_latest (
  chain TEXT NOT NULL,
  token_address TEXT NOT NULL,
  symbol TEXT NOT NULL,
  ts DOUBLE PRECISION NOT NULL,
  rating DOUBLE PRECISION NOT NULL,
  tier TEXT NOT NULL,
  severity INTEGER NOT NULL,
  price_ratio DOUBLE PRECISION,
  abs_deviation_pct DOUBLE PRECISION,
  tier_since DOUBLE PRECISION NOT NULL,
  collapsed INTEGER NOT NULL,
  snapshot TEXT NOT NULL,
  PRIMARY KEY (chain, token_address)
);
CREATE INDEX rating_latest_rating ON rating_latest (rating);
CREATE INDEX rating_latest_ts ON rating_latest (ts);
CREATE TABLE rating_history (
  chain TEXT NOT NULL,
  token_address TEXT NOT NULL,
  ts DOUBLE PRECISION NOT NULL,
  rating DOUBLE PRECISION NOT NULL,
  tier TEXT NOT NULL,
  severity INTEGER NOT NULL,
  deviation_pct DOUBLE PRECISION,
  price_usd TEXT,
  peg_usd TEXT,
  PRIMARY KEY (chain, token_address, ts)
);
CREATE INDEX rating_history_ts ON rating_history (ts);
CREATE TABLE tier_changes (
  event_id TEXT PRIMARY KEY,
  chain TEXT NOT NULL,
  token_address TEXT NOT NULL,
  ts DOUBLE PRECISION NOT NULL,
  old_tier TEXT NOT NULL,
  new_tier TEXT NOT NULL,
  event TEXT NOT NULL
);
CREATE INDEX tier_changes_token ON tier_changes (chain, token_address, ts);
CREATE TABLE depeg_episodes (
  chain TEXT NOT NULL,
  token_address TEXT NOT NULL,
  started_at DOUBLE PRECISION NOT NULL,
  start_event_id TEXT NOT NULL,
  started_tier TEXT NOT NULL,
  worst_tier TEXT NOT NULL,
  peak_deviation_pct DOUBLE PRECISION,
  peak_at DOUBLE PRECISION,
  peak_price_usd TEXT,
  peak_rating DOUBLE PRECISION,
  recovered_at DOUBLE PRECISION,
  recovery_event_id TEXT,
  PRIMARY KEY (chain, token_address, started_at)
);
CREATE INDEX depeg_episodes_recovered ON depeg_episodes (recovered_at);
CREATE TABLE token_registry (
  chain TEXT NOT NULL,
  token_address TEXT NOT NULL,
  symbol TEXT NOT NULL,
  name TEXT NOT NULL,
  peg_type TEXT NOT NULL,
  peg_reference TEXT NOT NULL,
  market_cap_usd DOUBLE PRECISION,
  tags TEXT NOT NULL,
  PRIMARY KEY (chain, token_address)
);
"""

#: One row whose ``version`` every write transaction of the ratings store increments, so
#: a reader can tell in one indexed lookup whether anything it cached may have changed.
_V2 = """
CREATE TABLE ratings_version (
  id INTEGER PRIMARY KEY,
  version BIGINT NOT NULL
);
INSERT INTO ratings_version (id, version) VALUES (1, 0)
"""

#: When the store writer stored a token's latest rating (wall clock): a rating that nothing
#: has refreshed for ``model.stale_after_seconds`` is stale whatever its own event time says
#: (the monitor stopped, or a restarted service serves the previous run's ratings).
_V3 = "ALTER TABLE rating_latest ADD COLUMN received_at DOUBLE PRECISION"

MIGRATIONS = [Migration(1, "ratings, history, tier changes, episodes, registry", _V1),
              Migration(2, "ratings version counter (read caches)", _V2),
              Migration(3, "rating_latest.received_at", _V3)]
