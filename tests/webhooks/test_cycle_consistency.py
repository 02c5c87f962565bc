"""A bookkeeping cycle's answer agrees with the rows it wrote.

The PostgreSQL cycle is one statement: every part of it sees the same snapshot, and a
statement that updated one row twice (an outcome's delivery that is also due again)
keeps only one of the two updates, silently. The dispatcher acts on the cycle's answer
(what it recorded, what it claimed with which attempt number), so that answer must be
what the database now holds, on both backends.
"""

from __future__ import annotations

import time

from monitor.config import DeliveryConfig
from monitor.storage import Database
from monitor.storage.delivery_batches import Outcome, run_cycle
from monitor.storage.due_read import ClaimRequest
from monitor.webhooks.secrets import SecretBox
from tests.webhook_support import ENCRYPTION_KEY, attempt_history, queue_for_new_subscription


async def test_an_outcome_due_again_in_the_same_cycle_is_recorded_once(
        webhook_db: Database) -> None:
    box = SecretBox.from_config(DeliveryConfig(secret_encryption_key=ENCRYPTION_KEY))
    await queue_for_new_subscription(webhook_db, box, "http://127.0.0.1:9/hook", 1)
    t0 = time.time() + 1  # the delivery is due from now on
    # Claimed by a sender whose lease runs out at t0 + 1, before its outcome arrives.
    first = await run_cycle(webhook_db, [], ClaimRequest(5, {}, 5, "A", t0, t0 + 1, 5))
    assert [n for _, n in first.claimed] == [1]
    d = first.claimed[0][0]
    # Its outcome (failed, retry due at once) comes with the next claim, lease expired.
    now = t0 + 2
    failed = Outcome(d, "A", 1, t0, 500, 1.0, "HTTP 500", "failed", t0 + 1, now)
    second = await run_cycle(webhook_db, [failed], ClaimRequest(5, {}, 5, "B", now, now + 60, 5))

    assert second.recorded == {d.id}  # nobody else took the claim: still A's to record
    history = await webhook_db.fetch("SELECT attempt, status_code FROM webhook_attempts"
                                     " WHERE delivery_id = $1 ORDER BY attempt", d.id)
    assert [(h["attempt"], h["status_code"]) for h in history] == [(1, 500)]
    row = await webhook_db.fetchrow(
        "SELECT status, attempts, lease_token FROM webhook_deliveries WHERE id = $1", d.id)
    assert row is not None
    state = (row["status"], row["attempts"], row["lease_token"])
    if second.claimed:
        # Taken again at once (SQLite reads after its own writes): as attempt 2, held by B.
        assert [(c.id, n) for c, n in second.claimed] == [(d.id, 2)]
        assert state == ("failed", 2, "B")
    else:
        # Left for the next cycle (PostgreSQL's due read leaves out this cycle's outcomes).
        assert state == ("failed", 1, None)
        third = await run_cycle(webhook_db, [], ClaimRequest(5, {}, 5, "C", now, now + 60, 5))
        assert [(c.id, n) for c, n in third.claimed] == [(d.id, 2)]


async def test_a_lost_claim_in_a_large_batch_leaves_the_others_recorded(
        webhook_db: Database) -> None:
    """A batch of outcomes in which one claim was lost (its lease ran out and another
    worker took the delivery): every other outcome is recorded, the lost one changes
    nothing. On SQLite the batch is first written whole inside a savepoint and undone
    when its row count falls short; 150 outcomes touch far more pages than the 64 KiB
    SQLite keeps a savepoint's journal in memory by default, so this also checks the
    undo with the journal where the connection keeps it (``temp_store``)."""
    box = SecretBox.from_config(DeliveryConfig(secret_encryption_key=ENCRYPTION_KEY))
    await queue_for_new_subscription(webhook_db, box, "http://127.0.0.1:9/hook", 150)
    t0 = time.time() + 1
    first = await run_cycle(webhook_db, [], ClaimRequest(150, {}, 150, "A", t0, t0 + 1, 5))
    assert len(first.claimed) == 150
    # A's lease ran out; B claimed the delivery A claimed last, so A no longer holds it.
    lost = first.claimed[-1][0]
    await webhook_db.execute("UPDATE webhook_deliveries SET lease_token = 'B', attempts = 2"
                             " WHERE id = $1", lost.id)
    now = t0 + 2
    outcomes = [Outcome(d, "A", n, t0, 200, 1.0, None, "success", None, now)
                for d, n in first.claimed]
    result = await run_cycle(webhook_db, outcomes, None)

    assert result.recorded == {d.id for d, _ in first.claimed} - {lost.id}
    rows = {r["id"]: (r["status"], r["attempts"], r["lease_token"]) for r in await webhook_db.fetch(
        "SELECT id, status, attempts, lease_token FROM webhook_deliveries")}
    assert rows.pop(lost.id) == ("pending", 2, "B")
    assert set(rows.values()) == {("success", 1, None)}
    assert await attempt_history(webhook_db) == \
        sorted((d.id, 1, 200, None) for d, _ in first.claimed if d.id != lost.id)
