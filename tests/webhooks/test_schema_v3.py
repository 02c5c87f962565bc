"""Webhook schema version 3 upgrades a database the previous release created.

The old database is built by the migrations up to version 2, exactly the DDL that release
ran (a migration, once released, never changes), filled as that release's stores did,
then migrated to the newest version. Its rows are compared in the columns version 2 had
(version 5 adds the deliveries' numbers, ``test_schema_v5.py``).
"""

from __future__ import annotations

import pytest

from monitor.records import encode
from monitor.storage import Database, connect
from monitor.storage.db import migrate
from monitor.storage.deliveries import DeliveryStore, NewEvent, delivery_id
from monitor.storage.webhooks import WebhookStore, migrate_webhooks
from monitor.storage.webhooks_schema import COMPONENT, MIGRATIONS
from tests.webhook_support import tier_change
from tests.webhooks.schema_support import key_with_subscriptions, record_events_unnumbered

_DELIVERY_INSERT = (
    "INSERT INTO webhook_deliveries (id, subscription_id, api_key_id, event_id, event_type,"
    " status, attempts, next_attempt_at, created_at, updated_at)"
    " VALUES ($1, $2, $3, $4, 'DEPEG_TIER_CHANGE', 'pending', 0, 1, 1, 1)")


async def _old_database(db: Database) -> tuple[str, list[str], list[NewEvent]]:
    """A version-2 database with a key, two subscriptions and two events: one delivery
    still pending, one failed with a retry due, two finished with their history."""
    assert await migrate(db, COMPONENT, [m for m in MIGRATIONS if m.version <= 2]) == 2
    subs = await key_with_subscriptions(db, 2)
    key_id = subs[0].api_key_id
    events = [NewEvent(e.event_id, e.event_type, encode(e), subs)
              for e in (tier_change(), tier_change())]
    await record_events_unnumbered(db, events, 100.0)
    ids = [delivery_id(s.id, e.event_id) for e in events for s in subs]
    await db.execute("UPDATE webhook_deliveries SET status = 'failed', attempts = 1,"
                     " next_attempt_at = 150 WHERE id = $1", ids[1])
    for did, status in ((ids[2], "success"), (ids[3], "max_retries_exceeded")):
        await db.execute("UPDATE webhook_deliveries SET status = $2, attempts = 1,"
                         " next_attempt_at = NULL, completed_at = 120 WHERE id = $1",
                         did, status)
        await db.execute("INSERT INTO webhook_attempts VALUES ($1, 1, 0, 110, 200, 5, NULL)",
                         did)
    # What the old schema guarded with UNIQUE (subscription_id, event_id).
    with pytest.raises(Exception, match=r"(?i)unique"):
        await db.execute(_DELIVERY_INSERT, "another-id", subs[0].id, key_id,
                         events[0].event_id)
    return key_id, ids, events


#: Columns newer than version 2 (version 5's numbers, version 6's success columns),
#: left out of the comparisons.
_NEWER = ("seq", "delivery_seq", "success_started_at", "success_latency_ms")


async def _rows(db: Database, table: str, order: str) -> list[dict[str, object]]:
    return [{k: v for k, v in row.items() if k not in _NEWER}
            for row in await db.fetch(f"SELECT * FROM {table} ORDER BY {order}")]


def _attempt(delivery: str, attempt: int, started: float, code: int) -> tuple[str, list[object]]:
    """An attempt's history row for ``delivery``, in the newest schema's columns."""
    return ("INSERT INTO webhook_attempts (delivery_seq, delivery_id, attempt, manual,"
            " started_at, status_code, latency_ms, error) SELECT seq, id, $2, 0, $3, $4, 5,"
            " NULL FROM webhook_deliveries WHERE id = $1", [delivery, attempt, started, code])


async def test_version_3_upgrades_an_old_database(storage_url: str) -> None:
    db = await connect(storage_url)
    try:
        key_id, ids, events = await _old_database(db)
        deliveries = await _rows(db, "webhook_deliveries", "id")
        attempts = await _rows(db, "webhook_attempts", "delivery_id, attempt")
        ledger = await _rows(db, "cu_ledger", "id")

        assert await migrate_webhooks(db) == max(m.version for m in MIGRATIONS) >= 3
        assert await _rows(db, "webhook_deliveries", "id") == deliveries
        assert await _rows(db, "webhook_attempts", "delivery_id, attempt") == attempts
        assert await _rows(db, "cu_ledger", "id") == ledger
        if db.dialect == "sqlite":
            assert await db.fetch("PRAGMA foreign_key_check") == []

        store = DeliveryStore(db)
        # A replayed event still creates (and charges) nothing: the id is the pair's.
        assert await store.record_events(events, 200.0) == 0
        assert len(await _rows(db, "webhook_deliveries", "id")) == 4
        assert await _rows(db, "cu_ledger", "id") == ledger
        with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
            await db.execute(_DELIVERY_INSERT, ids[0], events[0].subscriptions[0].id,
                             key_id, events[0].event_id)
        # The deliveries' foreign keys survived the rebuild (SQLite); the history's key
        # to its delivery is gone on purpose (see the migration), its primary key stays.
        with pytest.raises(Exception, match=r"(?i)foreign key"):
            await db.execute(_DELIVERY_INSERT, "orphan", "no-such-subscription", key_id,
                             events[0].event_id)
        sql, args = _attempt(ids[2], 2, 130, 500)
        await db.execute(sql, *args)
        with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
            sql, args = _attempt(ids[2], 2, 140, 200)
            await db.execute(sql, *args)

        # The due read finds the pending and the failed delivery, oldest first...
        due = await store.due(now=1000.0, limit=10)
        assert [d.id for d in due] == [ids[0], ids[1]]
        # ... and deleting a subscription cancels its unfinished deliveries only.
        sub = events[0].subscriptions[0].id
        assert await WebhookStore(db).delete_subscription(key_id, sub, 300.0)
        statuses = {r["id"]: r["status"] for r in await _rows(db, "webhook_deliveries", "id")}
        assert statuses == {ids[0]: "cancelled", ids[1]: "failed", ids[2]: "success",
                            ids[3]: "max_retries_exceeded"}
        assert await migrate_webhooks(db) >= 3  # nothing left to do the second time
    finally:
        await db.close()


async def test_due_index_holds_only_rows_a_due_read_can_return(webhook_db: Database) -> None:
    if webhook_db.dialect == "postgresql":
        definitions = [r["indexdef"] for r in await webhook_db.fetch(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'webhook_deliveries'")]
    else:
        definitions = [r["sql"] for r in await webhook_db.fetch(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'webhook_deliveries'"
            " AND type = 'index' AND sql IS NOT NULL")]
        # SQLite's own index of a UNIQUE constraint has no SQL text: none may be left.
        autos = await webhook_db.fetch("SELECT name FROM sqlite_master WHERE type = 'index'"
                                       " AND name = 'sqlite_autoindex_webhook_deliveries_2'")
        assert autos == []
    assert not any("UNIQUE" in d.upper() and "event_id" in d for d in definitions)
    for name in ("webhook_deliveries_due ", "webhook_deliveries_subscription_due "):
        due = [d for d in definitions if name in d]
        assert len(due) == 1 and "next_attempt_at IS NOT NULL" in due[0]
    if webhook_db.dialect == "sqlite":
        # The due read's statement is planned on the due index; a subscription's oldest
        # due rows (the cycle's read by subscription) and the cancel's on the other.
        plan = await webhook_db.fetch(
            "EXPLAIN QUERY PLAN SELECT id FROM webhook_deliveries WHERE status = 'pending'"
            " AND next_attempt_at <= 5 ORDER BY next_attempt_at LIMIT 3")
        assert any("webhook_deliveries_due " in str(r["detail"]) for r in plan)
        plan = await webhook_db.fetch(
            "EXPLAIN QUERY PLAN SELECT id FROM webhook_deliveries WHERE subscription_id = 'x'"
            " AND next_attempt_at <= 5 ORDER BY next_attempt_at LIMIT 3")
        assert any("webhook_deliveries_subscription_due " in str(r["detail"]) for r in plan)
        assert not any("TEMP B-TREE" in str(r["detail"]) for r in plan)  # no sort
        plan = await webhook_db.fetch(
            "EXPLAIN QUERY PLAN UPDATE webhook_deliveries SET status = 'cancelled',"
            " next_attempt_at = NULL WHERE subscription_id = 'x'"
            " AND status IN ('pending', 'failed') AND next_attempt_at IS NOT NULL")
        assert any("webhook_deliveries_subscription_due " in str(r["detail"]) for r in plan)
