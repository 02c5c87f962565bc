"""Webhook schema version 6: a success the worker's cycle records keeps its start and
latency on its delivery's row and writes no history row of its own.

What a user reads must not change: the attempt history, read through the store (as the
API reads it), lists every attempt once, a success included, whether the success was
written before the upgrade (a history row) or after (its delivery's row). The expected
histories here are the attempts put in, not an earlier answer of the store.
"""

from __future__ import annotations

from monitor.records import encode
from monitor.storage import Database, connect
from monitor.storage.db import migrate
from monitor.storage.deliveries import DeliveryStore, NewEvent, delivery_id
from monitor.storage.delivery_batches import Outcome, run_cycle
from monitor.storage.due_read import ClaimRequest
from monitor.storage.webhooks import migrate_webhooks
from monitor.storage.webhooks_schema import COMPONENT, MIGRATIONS
from tests.webhook_support import tier_change
from tests.webhooks.schema_support import key_with_subscriptions

#: (attempt, manual, started_at, status_code, latency_ms, error) per delivery, in order.
History = dict[str, list[tuple[object, ...]]]
_HISTORY_INSERT = ("INSERT INTO webhook_attempts (delivery_seq, delivery_id, attempt, manual,"
                   " started_at, status_code, latency_ms, error)"
                   " SELECT seq, id, $2, 0, $3, $4, $5, $6 FROM webhook_deliveries"
                   " WHERE id = $1")


def _read(found: dict[str, list[dict[str, object]]]) -> History:
    return {did: [(r["attempt"], r["manual"], r["started_at"], r["status_code"],
                   r["latency_ms"], r["error"]) for r in rows] for did, rows in found.items()}


async def _version_5(db: Database) -> list[str]:
    """One event to three subscriptions as version 5 recorded it: the first delivery a
    success at its first attempt, the second failed once (a retry due at 120), the third
    pending; each attempt with its history row, as version 5's worker wrote them."""
    assert await migrate(db, COMPONENT, [m for m in MIGRATIONS if m.version <= 5]) == 5
    subs = await key_with_subscriptions(db, 3)
    event = tier_change()
    # The intake's statements are the same in versions 5 and 6.
    await DeliveryStore(db).record_events(
        [NewEvent(event.event_id, event.event_type, encode(event), subs)], 100.0)
    ids = [delivery_id(sub.id, event.event_id) for sub in subs]
    await db.execute("UPDATE webhook_deliveries SET status = 'success', attempts = 1,"
                     " next_attempt_at = NULL, last_status_code = 200, updated_at = 111,"
                     " completed_at = 111 WHERE id = $1", ids[0])
    await db.execute(_HISTORY_INSERT, ids[0], 1, 110.0, 200, 5.0, None)
    await db.execute("UPDATE webhook_deliveries SET status = 'failed', attempts = 1,"
                     " next_attempt_at = 120, last_status_code = 500, last_error = 'HTTP 500',"
                     " updated_at = 112 WHERE id = $1", ids[1])
    await db.execute(_HISTORY_INSERT, ids[1], 1, 111.0, 500, 6.0, "HTTP 500")
    return ids


async def test_version_6_reads_successes_before_and_after_it_alike(storage_url: str) -> None:
    db = await connect(storage_url)
    try:
        done, retried, fresh = await _version_5(db)
        assert await migrate_webhooks(db) == max(m.version for m in MIGRATIONS) >= 6
        store = DeliveryStore(db)
        expected: History = {done: [(1, 0, 110.0, 200, 5.0, None)],
                             retried: [(1, 0, 111.0, 500, 6.0, "HTTP 500")], fresh: []}
        assert _read(await store.attempts([done, retried, fresh])) == expected

        # The worker's cycle: the retry succeeds at its second attempt, the pending one
        # at its first.
        now = 125.0
        claimed = (await run_cycle(db, [], ClaimRequest(5, {}, 5, "T", now, now + 60, 5))
                   ).claimed
        assert sorted((d.id, n) for d, n in claimed) == sorted([(retried, 2), (fresh, 1)])
        sent = {retried: (130.5, 200, 7.25), fresh: (131.0, 204, 3.5)}
        outcomes = [Outcome(d, "T", n, sent[d.id][0], sent[d.id][1], sent[d.id][2], None,
                            "success", None, 140.0) for d, n in claimed]
        assert (await run_cycle(db, outcomes, None)).recorded == {retried, fresh}

        expected[retried].append((2, 0, 130.5, 200, 7.25, None))
        expected[fresh].append((1, 0, 131.0, 204, 3.5, None))
        assert _read(await store.attempts([done, retried, fresh])) == expected
        # Stored as history rows: the two attempts written before the upgrade, no more.
        assert await db.fetchval("SELECT COUNT(*) FROM webhook_attempts") == 2

        # A history row of the attempt, where one exists, is read in its place.
        await db.execute(_HISTORY_INSERT, fresh, 1, 131.0, 204, 3.75, None)
        found = _read(await store.attempts([fresh]))
        assert found == {fresh: [(1, 0, 131.0, 204, 3.75, None)]}
        # Pruning the finished deliveries leaves no history behind, stored or not.
        assert await store.prune(before=1e12) == 3
        assert _read(await store.attempts([done, retried, fresh])) == {
            done: [], retried: [], fresh: []}
        assert await db.fetchval("SELECT COUNT(*) FROM webhook_attempts") == 0
    finally:
        await db.close()


#: What version 5's ``DeliveryStore.attempts`` read: the history rows alone.
_VERSION_5_READER = ("SELECT d.id AS delivery_id, a.attempt, a.status_code"
                     " FROM webhook_deliveries d JOIN webhook_attempts a"
                     " ON a.delivery_seq = d.seq WHERE d.id = $1")


async def test_a_rollback_below_version_6_starts_and_misses_only_the_success_attempt(
        storage_url: str) -> None:
    """docs/webhooks.md: a release older than version 6 starts on a version-6 database
    (its migrations find nothing to do), and reads a success recorded since without its
    last attempt, while the delivery's status, attempt count and status code stay right."""
    db = await connect(storage_url)
    try:
        assert await migrate_webhooks(db) >= 6
        subs = await key_with_subscriptions(db, 1)
        event = tier_change()
        await DeliveryStore(db).record_events(
            [NewEvent(event.event_id, event.event_type, encode(event), subs)], 100.0)
        claimed = (await run_cycle(db, [], ClaimRequest(5, {}, 5, "T", 101.0, 161.0, 5))
                   ).claimed
        [(delivery, attempt)] = claimed
        outcome = Outcome(delivery, "T", attempt, 102.0, 200, 4.5, None, "success", None,
                          103.0)
        assert (await run_cycle(db, [outcome], None)).recorded == {delivery.id}

        # The older release's start: its migrations (up to version 5) apply nothing.
        assert await migrate(db, COMPONENT, [m for m in MIGRATIONS if m.version <= 5]) >= 6
        row = await db.fetchrow("SELECT status, attempts, last_status_code"
                                " FROM webhook_deliveries WHERE id = $1", delivery.id)
        assert row is not None
        assert (row["status"], row["attempts"], row["last_status_code"]) == ("success", 1, 200)
        assert await db.fetch(_VERSION_5_READER, delivery.id) == []
    finally:
        await db.close()
