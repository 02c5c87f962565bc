"""The cycle's claim: with other transactions around (workers, the API); whose rows.

The cycle reads its candidates without locking them and locks only the rows it chooses
(``FOR UPDATE ... SKIP LOCKED``), re-testing each locked row in its newest version. So a
row another transaction holds is skipped, and a row another worker claimed after this
statement's snapshot is not claimed again: checked here against what the rows say.
A revoked key's deliveries are never claimed (both backends).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from monitor.config import DeliveryConfig
from monitor.storage import Database, connect
from monitor.storage.delivery_batches import run_cycle
from monitor.storage.due_read import ClaimRequest
from monitor.storage.webhooks import WebhookStore, migrate_webhooks
from monitor.webhooks.secrets import SecretBox
from tests.webhook_support import ENCRYPTION_KEY, queue_for_new_subscription


def _box() -> SecretBox:
    return SecretBox.from_config(DeliveryConfig(secret_encryption_key=ENCRYPTION_KEY))


async def test_workers_never_claim_one_delivery_twice(pg_url: str) -> None:
    # Three workers on their own connections racing over small claims, several rounds:
    # a row claimed by one worker between another's snapshot and its lock must be
    # re-tested and left out (without that re-test this fails in most runs).
    dbs = [await connect(pg_url) for _ in range(3)]
    try:
        await migrate_webhooks(dbs[0])
        for round_ in range(6):
            # Each round adds a subscription; its events go to every earlier one too.
            before = {r["id"] for r in await dbs[0].fetch("SELECT id FROM webhook_deliveries")}
            await queue_for_new_subscription(dbs[0], _box(), "http://127.0.0.1:9/hook", 60)
            new = {r["id"] for r in await dbs[0].fetch("SELECT id FROM webhook_deliveries")}
            new -= before
            now = time.time() + 1
            claimed: Counter[str] = Counter()

            async def worker(db: Database, name: str, now: float = now,
                             claimed: Counter[str] = claimed) -> None:
                for n in range(200):
                    # A fresh token per cycle; leases far beyond the test: none expires.
                    result = await run_cycle(db, [], ClaimRequest(
                        3, {}, 3, f"{name}{n}", now, now + 3600, 5))
                    claimed.update(d.id for d, _ in result.claimed)
                    if not result.claimed:
                        return

            await asyncio.gather(*(worker(db, f"{round_}{w}") for w, db in enumerate(dbs)))
            rows = await dbs[0].fetch(
                "SELECT id, attempts FROM webhook_deliveries WHERE lease_until = $1",
                now + 3600)
            assert claimed and max(claimed.values()) == 1
            assert set(claimed) == new == {r["id"] for r in rows}
            assert all(r["attempts"] == 1 for r in rows)
    finally:
        for db in dbs:
            await db.close()


async def test_rows_another_transaction_holds_are_skipped(pg_url: str) -> None:
    db = await connect(pg_url)
    try:
        await migrate_webhooks(db)
        await queue_for_new_subscription(db, _box(), "http://127.0.0.1:9/hook", 6)
        ids = [r["id"] for r in await db.fetch(
            "SELECT id FROM webhook_deliveries ORDER BY next_attempt_at, id")]
        now = time.time() + 1
        async with db.transaction() as tx:  # another worker's cycle, in flight
            await tx.execute("SELECT id FROM webhook_deliveries WHERE id = ANY($1::text[])"
                             " FOR UPDATE", ids[:2])
            # Bounded: a cycle that waited for those locks would never return here.
            held = await asyncio.wait_for(run_cycle(
                db, [], ClaimRequest(10, {}, 10, "x", now, now + 60, 5)), 30)
            assert {d.id for d, _ in held.claimed} == set(ids[2:])
        later = await run_cycle(db, [], ClaimRequest(10, {}, 10, "y", now, now + 60, 5))
        assert {d.id for d, _ in later.claimed} == set(ids[:2])
    finally:
        await db.close()


async def test_a_revoked_keys_deliveries_are_not_claimed(webhook_db: Database) -> None:
    # Both backends. Two keys, one subscription each, deliveries due for both.
    box = _box()
    await queue_for_new_subscription(webhook_db, box, "http://127.0.0.1:9/a", 3)
    await queue_for_new_subscription(webhook_db, box, "http://127.0.0.1:9/b", 3)
    rows = await webhook_db.fetch("SELECT id, api_key_id FROM webhook_deliveries")
    keys = sorted({r["api_key_id"] for r in rows})
    assert len(keys) == 2
    assert await WebhookStore(webhook_db).revoke_api_key(keys[0], time.time()) == 1
    now = time.time() + 1
    result = await run_cycle(webhook_db, [], ClaimRequest(50, {}, 50, "t", now, now + 60, 5))
    assert {d.id for d, _ in result.claimed} == {r["id"] for r in rows
                                                 if r["api_key_id"] == keys[1]}
