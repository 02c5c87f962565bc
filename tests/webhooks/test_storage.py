"""Webhook storage on SQLite and PostgreSQL (one suite, both backends)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from monitor.config import DeliveryConfig
from monitor.records import encode
from monitor.storage import Database
from monitor.storage.deliveries import SQLITE_RECORD_THREAD_AT, DeliveryStore, NewEvent
from monitor.storage.webhooks import WebhookStore, migrate_webhooks
from monitor.storage.webhooks_schema import MIGRATIONS
from monitor.webhooks.filters import Filters
from monitor.webhooks.secrets import SecretBox, SecretStoreError
from tests.webhook_support import ENCRYPTION_KEY, new_key, tier_change


async def _subscription(db: Database, key_id: str, secret: str = "whsec_x") -> str:
    box = SecretBox.from_config(DeliveryConfig(secret_encryption_key=ENCRYPTION_KEY))
    sub_id = str(uuid.uuid4())
    await WebhookStore(db).create_subscription(
        sub_id=sub_id, api_key_id=key_id, webhook_url="https://example.com/h",
        endpoint="https://example.com:443", event_types=["DEPEG_TIER_CHANGE"],
        filters=Filters(), secret_sealed=box.seal(secret, sub_id), now=time.time())
    return sub_id


async def _dump(db: Database) -> str:
    tables = ["api_keys", "webhook_subscriptions", "webhook_events", "webhook_deliveries",
              "webhook_attempts", "cu_ledger"]
    return repr([await db.fetch(f"SELECT * FROM {t}") for t in tables])


async def test_migration_is_idempotent(webhook_db: Database) -> None:
    latest = max(m.version for m in MIGRATIONS)
    assert await migrate_webhooks(webhook_db) == latest
    assert await migrate_webhooks(webhook_db) == latest
    if webhook_db.dialect == "postgresql":
        # Room for the claim's new row version on the same page (a HOT update).
        options = await webhook_db.fetchval(
            "SELECT reloptions FROM pg_class WHERE relname = 'webhook_deliveries'")
        assert "fillfactor=50" in list(options or [])


async def test_api_keys_are_stored_hashed_and_revocable(webhook_db: Database) -> None:
    store = WebhookStore(webhook_db)
    key, key_id = await new_key(webhook_db)
    assert await store.authenticate(key) == key_id
    assert await store.authenticate(key + "x") is None
    assert key not in await _dump(webhook_db)
    listed = await store.list_api_keys()
    assert listed[0].prefix == key[:12] and listed[0].revoked_at is None
    assert await store.revoke_api_key(listed[0].prefix, time.time()) == 1
    assert await store.authenticate(key) is None
    assert await store.revoke_api_key(key_id, time.time()) == 0


async def test_secrets_are_not_in_a_dump_and_bound_to_their_row(webhook_db: Database) -> None:
    _, key_id = await new_key(webhook_db)
    secret = "whsec_" + "5e" * 32
    sub_id = await _subscription(webhook_db, key_id, secret)
    assert secret not in await _dump(webhook_db)
    sub = await WebhookStore(webhook_db).get_subscription(key_id, sub_id)
    assert sub is not None
    box = SecretBox.from_config(DeliveryConfig(secret_encryption_key=ENCRYPTION_KEY))
    assert box.open(sub.secret_sealed, sub_id) == secret
    with pytest.raises(SecretStoreError):
        box.open(sub.secret_sealed, "another-subscription")
    other = SecretBox(b"o" * 32)
    with pytest.raises(SecretStoreError):
        other.open(sub.secret_sealed, sub_id)


async def test_subscriptions_are_scoped_to_their_key(webhook_db: Database) -> None:
    _, a = await new_key(webhook_db, "a")
    _, b = await new_key(webhook_db, "b")
    sub_id = await _subscription(webhook_db, a)
    store = WebhookStore(webhook_db)
    assert await store.get_subscription(b, sub_id) is None
    assert await store.list_subscriptions(b) == []
    assert await store.update_subscription(b, sub_id, {"is_active": False}, time.time()) is None
    assert not await store.delete_subscription(b, sub_id, time.time())
    sub = await store.get_subscription(a, sub_id)
    assert sub is not None and sub.is_active


async def test_replayed_event_creates_no_second_delivery(webhook_db: Database) -> None:
    _, key_id = await new_key(webhook_db)
    sub_id = await _subscription(webhook_db, key_id)
    subs = await WebhookStore(webhook_db).active_subscriptions()
    assert [s.id for s in subs] == [sub_id]
    event = tier_change()
    deliveries = DeliveryStore(webhook_db)
    new = NewEvent(event.event_id, event.event_type, encode(event), subs)
    assert await deliveries.record_events([new], time.time()) == 1
    assert await deliveries.record_events([new], time.time()) == 0  # the same event id again
    rows, total = await deliveries.list_page(key_id)
    assert total == 1 and rows[0]["status"] == "pending"
    assert await WebhookStore(webhook_db).units_used(key_id, "delivery") == 1
    due = await deliveries.due(time.time() + 1, 10)
    assert len(due) == 1 and due[0].payload == encode(event)


@pytest.mark.parametrize("events", [3, SQLITE_RECORD_THREAD_AT])
async def test_a_batch_counts_and_charges_only_its_new_deliveries(webhook_db: Database,
                                                                  events: int) -> None:
    """A batch that repeats part of an earlier one (a re-consumed Kafka batch): it creates,
    counts and charges only the deliveries not there yet, whether SQLite writes it on the
    loop's thread or, at SQLITE_RECORD_THREAD_AT rows and more, on a thread of its own.
    The counts are checked against the tables themselves."""
    _, key_id = await new_key(webhook_db)
    for _ in range(2):
        await _subscription(webhook_db, key_id)
    subs = await WebhookStore(webhook_db).active_subscriptions()
    store = DeliveryStore(webhook_db)
    batch = [tier_change() for _ in range(events)]
    new = [NewEvent(e.event_id, e.event_type, encode(e), subs) for e in batch]
    first = events // 3
    assert await store.record_events(new[:first], time.time()) == 2 * first
    assert await store.record_events(new, time.time()) == 2 * (events - first)
    assert await webhook_db.fetchval("SELECT COUNT(*) FROM webhook_deliveries") == 2 * events
    assert await webhook_db.fetchval("SELECT COUNT(*) FROM webhook_events") == events
    assert await WebhookStore(webhook_db).units_used(key_id, "delivery") == 2 * events
    assert await store.record_events([NewEvent(batch[0].event_id, batch[0].event_type,
                                               encode(batch[0]), [])], time.time()) == 0
    again = tier_change()  # an event twice in one batch (published twice)
    twice = NewEvent(again.event_id, again.event_type, encode(again), subs)
    assert await store.record_events([twice, twice], time.time()) == 2
    assert await WebhookStore(webhook_db).units_used(key_id, "delivery") == 2 * events + 2


async def _one_pending_delivery(db: Database) -> tuple[str, DeliveryStore]:
    """A key with one subscription and one event recorded for it: one pending delivery."""
    _, key_id = await new_key(db)
    await _subscription(db, key_id)
    subs = await WebhookStore(db).active_subscriptions()
    event = tier_change()
    store = DeliveryStore(db)
    await store.record_events([NewEvent(event.event_id, event.event_type, encode(event), subs)],
                              time.time())
    return key_id, store


async def test_claims_are_exclusive_and_success_is_recorded_once(webhook_db: Database) -> None:
    key_id, store = await _one_pending_delivery(webhook_db)
    now = time.time() + 1
    (due,) = await store.due(now, 10)
    assert await store.claim(due.id, "t1", now, now + 60)
    assert not await store.claim(due.id, "t2", now, now + 60)   # held
    assert await store.due(now, 10) == []                       # leased rows are not due
    kwargs: dict[str, Any] = dict(manual=False, started_at=now, status_code=200, latency_ms=1.0,
                                  error=None, new_status="success", next_attempt_at=None, now=now)
    assert not await store.record_attempt(delivery=due, token="t2", **kwargs)  # not the holder
    assert await store.record_attempt(delivery=due, token="t1", **kwargs)
    # an expired lease cannot be re-claimed for a success
    assert not await store.claim(due.id, "t3", now + 120, now + 180)
    assert not await store.record_attempt(delivery=due, token="t1", **kwargs)
    rows, _ = await store.list_page(key_id)
    assert rows[0]["status"] == "success" and rows[0]["attempts"] == 1
    attempts = await store.attempts([due.id])
    assert [a["status_code"] for a in attempts[due.id]] == [200]


async def test_overlapping_batch_claims_are_disjoint(webhook_db: Database) -> None:
    _, key_id = await new_key(webhook_db)
    await _subscription(webhook_db, key_id)
    subs = await WebhookStore(webhook_db).active_subscriptions()
    store = DeliveryStore(webhook_db)
    events = [tier_change() for _ in range(6)]
    await store.record_events(
        [NewEvent(e.event_id, e.event_type, encode(e), subs) for e in events], time.time())
    now = time.time() + 1
    ids = [d.id for d in await store.due(now, 10)]
    first = await store.claim_many(ids[:4], "a", now, now + 60)
    second = await store.claim_many(ids[2:], "b", now, now + 60)
    assert first == set(ids[:4]) and second == set(ids[4:])
    assert await store.claim_many(ids, "c", now + 61, now + 120) == set(ids)  # leases expired


async def test_prune_deletes_only_old_finished_history(webhook_db: Database) -> None:
    _, key_id = await new_key(webhook_db)
    await _subscription(webhook_db, key_id)
    subs = await WebhookStore(webhook_db).active_subscriptions()
    store = DeliveryStore(webhook_db)
    old, fresh = tier_change(), tier_change()
    t0 = time.time()
    for e, at in ((old, t0 - 100 * 86400), (fresh, t0 - 100 * 86400)):
        await store.record_events([NewEvent(e.event_id, e.event_type, encode(e), subs)], at)
    (done, pending) = sorted(await store.due(t0, 10), key=lambda d: d.event_id != old.event_id)
    assert await store.claim(done.id, "t", t0, t0 + 60)
    await store.record_attempt(delivery=done, token="t", manual=False, started_at=t0 - 90 * 86400,
                               status_code=200, latency_ms=1, error=None, new_status="success",
                               next_attempt_at=None, now=t0 - 90 * 86400)
    assert await store.prune(t0 - 30 * 86400) == 1
    rows, total = await store.list_page(key_id)
    assert total == 1 and rows[0]["id"] == pending.id  # unfinished work is never pruned
    assert await webhook_db.fetchval("SELECT COUNT(*) FROM webhook_attempts") == 0
    assert await webhook_db.fetchval("SELECT COUNT(*) FROM webhook_events") == 1
    assert await WebhookStore(webhook_db).units_used(key_id, "delivery") == 2  # billing stays


async def test_manual_retry_slot_once_per_interval(webhook_db: Database) -> None:
    key_id, store = await _one_pending_delivery(webhook_db)
    (due,) = await store.due(time.time() + 1, 10)
    now = time.time()
    assert await store.mark_manual_retry(key_id, due.id, now, 300)
    assert not await store.mark_manual_retry(key_id, due.id, now + 299, 300)
    assert await store.mark_manual_retry(key_id, due.id, now + 301, 300)
    _, other = await new_key(webhook_db, "other")
    assert not await store.mark_manual_retry(other, due.id, now + 1000, 300)
