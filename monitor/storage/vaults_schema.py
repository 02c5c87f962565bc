"""Tables of the "vaults" component (its own migration line in ``schema_migrations``).

One row per vault in ``vaults`` carries both halves the API filters on together: the
columns of the merged facts (written from ``vaults.facts``) and of the engine's latest
rating (from ``vaults.ratings``), so every E4 filter, sort and aggregate runs on one narrow
table without a join. The documents themselves (the merged facts JSON, the published rating
record) live in ``vault_documents``: a few KB per vault that a table scan for the aggregates
should not have to read (measured: 10x slower on SQLite with them inline). A row whose
rating columns are still NULL has facts but no rating record yet: it is not listed.

``vault_rating_history`` keeps one row per published rating record (``ts`` = the record's
event time) for the 90-day history of E5.
"""

from __future__ import annotations

from .db import Migration

COMPONENT = "vaults"

_V1 = """
CREATE TABLE vaults (
  chain TEXT NOT NULL,
  vault TEXT NOT NULL,
  facts_ts DOUBLE PRECISION,
  name TEXT,
  symbol TEXT,
  protocol TEXT,
  contract_type TEXT,
  underlying_symbol TEXT,
  underlying_address TEXT,
  underlying_risk TEXT,
  tvl_usd DOUBLE PRECISION,
  apy_pct DOUBLE PRECISION,
  looping_rate DOUBLE PRECISION,
  rating_ts DOUBLE PRECISION,
  rating DOUBLE PRECISION,
  tier TEXT,
  verdict TEXT,
  attention_needed INTEGER,
  tags TEXT,
  PRIMARY KEY (chain, vault)
);
CREATE TABLE vault_documents (
  chain TEXT NOT NULL,
  vault TEXT NOT NULL,
  facts TEXT,
  rating_ts DOUBLE PRECISION,
  record TEXT,
  PRIMARY KEY (chain, vault)
);
CREATE INDEX vaults_rating ON vaults (rating);
CREATE INDEX vaults_tvl ON vaults (tvl_usd);
-- Covers the aggregates of an unfiltered list (the default E4 request) in group order.
-- "Rated" is tested on rating_ts, which leads no index: SQLite would otherwise search this
-- index for "tier IS NOT NULL" and look every row up in the table for the other filters.
CREATE INDEX vaults_aggregates ON vaults (tier, chain, protocol, tvl_usd, attention_needed,
  rating_ts);
CREATE INDEX vaults_underlying ON vaults (chain, underlying_address);
-- The default E4 order (score_desc, missing ratings last), expression as vaults_read writes
-- it: the first page is read off the index instead of sorting every vault.
CREATE INDEX vaults_score_desc ON vaults (COALESCE(rating, -1e+300) DESC, chain DESC,
  vault DESC);
CREATE TABLE vault_rating_history (
  chain TEXT NOT NULL,
  vault TEXT NOT NULL,
  ts DOUBLE PRECISION NOT NULL,
  rating DOUBLE PRECISION,
  tier TEXT NOT NULL,
  verdict TEXT NOT NULL,
  tags TEXT NOT NULL,
  attention_needed INTEGER NOT NULL,
  PRIMARY KEY (chain, vault, ts)
);
CREATE INDEX vault_rating_history_ts ON vault_rating_history (ts);
"""

#: One row whose ``version`` every write transaction of the vault store increments (as
#: ``ratings_version`` for the ratings store): the read API's cached ``/vaults`` bodies
#: are reused while it reads the same (monitor/api/readcache.py).
_V2 = """
CREATE TABLE vaults_version (
  id INTEGER PRIMARY KEY,
  version BIGINT NOT NULL
);
INSERT INTO vaults_version (id, version) VALUES (1, 0)
"""

MIGRATIONS = [Migration(1, "vaults (facts + latest rating), rating history", _V1),
              Migration(2, "vaults version counter (read caches)", _V2)]
