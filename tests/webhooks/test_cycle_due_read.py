"""The due read picks what a full scan would, however long a full endpoint's queue.

The cycle's read walks the oldest due rows, at most a bounded number of them, and when it
stops there short of the rows it can claim (a hanging endpoint's backlog is the oldest),
it reads each subscription's oldest rows instead. Whatever path it takes, what the worker
claims must be what a brute-force pass over every row gives: oldest first, within each
endpoint's room and the limit, leaving out leased rows, finished ones, paused or deleted
subscriptions and revoked keys. A cycle that fills up on its walk's rows leaves the rest
to the next one, which the worker runs at once: the random tables are claimed as the
worker claims, cycle after cycle while cycles claim something, with the walk and (as the
worker reads behind endpoints that stay full) by subscription only. ``DeliveryStore.due``
(one-off reads) must give the oldest due rows exactly."""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass, replace

from monitor.config import DeliveryConfig
from monitor.records import encode
from monitor.storage import Database
from monitor.storage.deliveries import DeliveryStore, NewEvent
from monitor.storage.delivery_batches import run_cycle
from monitor.storage.due_read import ClaimRequest
from monitor.storage.webhooks import Subscription, WebhookStore
from monitor.webhooks.filters import Filters
from monitor.webhooks.secrets import SecretBox
from monitor.webhooks.urls import origin
from tests.webhook_support import ENCRYPTION_KEY, new_key, tier_change

#: Origins of the subscriptions below: subscriptions 0..2 share the first one.
URLS = ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b", "http://127.0.0.1:9/c",
        "http://127.0.0.2:9/d", "http://127.0.0.3:9/e", "http://127.0.0.4:9/f",
        "http://127.0.0.5:9/g"]


@dataclass
class Row:
    id: str
    subscription: str
    endpoint: str
    status: str
    next_attempt_at: float | None
    lease_until: float | None


async def _subscriptions(db: Database) -> tuple[list[Subscription], str]:
    """One subscription per URL, the last one under a second key (revoked by the tests
    that need it); returns them and that key's id."""
    box = SecretBox.from_config(DeliveryConfig(secret_encryption_key=ENCRYPTION_KEY))
    store = WebhookStore(db)
    _, key = await new_key(db)
    _, other_key = await new_key(db, "other")
    for n, url in enumerate(URLS):
        sid = str(uuid.uuid4())
        await store.create_subscription(
            sub_id=sid, api_key_id=other_key if n == len(URLS) - 1 else key,
            webhook_url=url, endpoint=origin(url), event_types=["DEPEG_TIER_CHANGE"],
            filters=Filters(), secret_sealed=box.seal("s" * 32, sid), now=time.time())
    return await store.active_subscriptions(), other_key


async def _queue(db: Database, subs: list[Subscription], count: int, at: float) -> None:
    events = [tier_change() for _ in range(count)]
    await DeliveryStore(db).record_events(
        [NewEvent(e.event_id, e.event_type, encode(e), subs) for e in events], at)


async def _rows(db: Database) -> list[Row]:
    found = await db.fetch(
        "SELECT d.id, d.subscription_id, s.endpoint, d.status, d.next_attempt_at,"
        " d.lease_until FROM webhook_deliveries d"
        " JOIN webhook_subscriptions s ON s.id = d.subscription_id")
    return [Row(r["id"], r["subscription_id"], r["endpoint"], r["status"],
                r["next_attempt_at"], r["lease_until"]) for r in found]


def _expected(rows: list[Row], claim: ClaimRequest, excluded: set[str]) -> list[str]:
    """The brute-force claim: every row looked at, oldest first (then by id)."""
    due = sorted((r for r in rows if _claimable(r, claim) and r.subscription not in excluded),
                 key=lambda r: (r.next_attempt_at, r.id))
    room = dict(claim.room)
    picked: list[str] = []
    for r in due:
        left = room.get(r.endpoint, claim.default_room)
        if len(picked) < claim.limit and left > 0:
            room[r.endpoint] = left - 1
            picked.append(r.id)
    return picked


async def _until_none(db: Database, claim: ClaimRequest, rows: list[Row]) -> list[str]:
    """Claim as the worker does: another cycle at once while one claims something and
    could claim more, the room and limit less what is claimed (in flight now)."""
    endpoint = {r.id: r.endpoint for r in rows}
    room, limit, got = dict(claim.room), claim.limit, []
    while limit > 0:
        ids = await _claimed(db, replace(claim, limit=limit, room=dict(room)))
        if not ids:
            break
        got += ids
        limit -= len(ids)
        for i in ids:
            room[endpoint[i]] = room.get(endpoint[i], claim.default_room) - 1
    return got


async def _claimed(db: Database, claim: ClaimRequest) -> list[str]:
    result = await run_cycle(db, [], claim)
    assert not result.exhausted
    return [d.id for d, _ in result.claimed]


async def test_a_full_endpoints_backlog_does_not_hide_the_others(webhook_db: Database
                                                                ) -> None:
    subs, _ = await _subscriptions(webhook_db)
    hanging = next(s for s in subs if s.webhook_url == URLS[3])
    healthy = next(s for s in subs if s.webhook_url == URLS[4])
    now = time.time()
    # 300 deliveries of the hanging endpoint, all older than the healthy one's three.
    await _queue(webhook_db, [hanging], 300, now)
    await _queue(webhook_db, [healthy], 3, now)
    # Each its own time (an event's deliveries share one; a tie may go either way).
    await _apply(webhook_db, [
        (r.id, "pending", now - (600 if r.endpoint == hanging.endpoint else 60) + n * 0.01,
         None, 0, n) for n, r in enumerate(await _rows(webhook_db))])
    rows = await _rows(webhook_db)
    # No room at the hanging endpoint: one cycle finds the healthy one's two oldest.
    claim = ClaimRequest(2, {hanging.endpoint: 0}, 4, "a", now, now + 60, 5)
    want = _expected(rows, claim, set())
    assert len(want) == 2 and await _claimed(webhook_db, claim) == want
    # Room for one more there: its oldest, and the healthy one's last (a second cycle,
    # as the worker runs at once after one that claimed and was cut).
    rows = await _rows(webhook_db)  # what was claimed is leased now
    claim = ClaimRequest(3, {hanging.endpoint: 1}, 4, "b", now, now + 60, 5)
    want = _expected(rows, claim, set())
    assert len(want) == 2 and sorted(await _until_none(webhook_db, claim, rows)) == \
        sorted(want)
    rows = await _rows(webhook_db)
    # The hanging endpoint's oldest went out once (room 1); the healthy one's all three.
    leased = [r for r in rows if r.lease_until is not None]
    assert sorted(r.endpoint for r in leased) == sorted(
        [hanging.endpoint] + [healthy.endpoint] * 3)
    assert min(r.next_attempt_at or 0 for r in rows if r.endpoint == hanging.endpoint) == \
        next(r.next_attempt_at for r in leased if r.endpoint == hanging.endpoint)


async def test_the_claim_is_a_full_scans_on_random_tables(webhook_db: Database) -> None:
    subs, other_key = await _subscriptions(webhook_db)
    now = time.time()
    await _queue(webhook_db, subs, 40, now)  # 280 deliveries
    ids = [r.id for r in await _rows(webhook_db)]
    by_url = {s.webhook_url: s for s in subs}
    # Paused, deleted, revoked: their rows may be due but are never claimed.
    paused, deleted = by_url[URLS[1]].id, by_url[URLS[5]].id
    await webhook_db.execute("UPDATE webhook_subscriptions SET is_active = 0 WHERE id = $1",
                             paused)
    await webhook_db.execute("UPDATE webhook_subscriptions SET deleted_at = 1 WHERE id = $1",
                             deleted)
    await WebhookStore(webhook_db).revoke_api_key(other_key, now)
    excluded = {paused, deleted, by_url[URLS[6]].id}
    endpoints = sorted({s.endpoint for s in subs})
    rng = random.Random(15)
    paths = set()
    for trial in range(24):
        pending_only = trial % 2 == 0
        # Each row's state drawn afresh; one endpoint's rows are made the oldest by far
        # on most trials (a hanging endpoint's backlog).
        oldest = rng.choice([*endpoints, ""])
        # Most rows due, or a few (then the walks pass every due row).
        later = rng.choice([0.1, 0.97])
        updates = []
        for i, did in enumerate(ids):
            status = "pending" if pending_only else rng.choice(
                ["pending", "pending", "failed", "success", "cancelled"])
            at = (None if status in ("success", "cancelled")
                  else now + (rng.uniform(1, 50) if rng.random() < later
                              else rng.uniform(-500, 0)))
            lease = rng.choice([None, None, None, now - 5, now + 60])
            attempts = 0 if status == "pending" else rng.randint(1, 3)
            updates.append((did, status, at, lease, attempts, i))
        await _set(webhook_db, updates, oldest)
        room = {e: rng.choice([0, 0, 1, 2, 5]) for e in endpoints if rng.random() < 0.6}
        if oldest:
            room[oldest] = rng.choice([0, 0, 1])
        claim = ClaimRequest(rng.randint(1, 8), room, rng.choice([2, 4, 6]),
                             f"t{trial}", now, now + 60, 5)
        rows = await _rows(webhook_db)
        # DeliveryStore.due (one-off reads, no claim): the oldest due rows, full
        # endpoints left out, exactly.
        full = sorted(e for e, n in room.items() if n <= 0)
        everything = ClaimRequest(claim.limit, dict.fromkeys(full, 0), 10**6, "", now, 0, 5)
        assert [d.id for d in await DeliveryStore(webhook_db).due(now, claim.limit, full)] \
            == _expected(rows, everything, excluded)
        want = _expected(rows, claim, excluded)
        # With the walk, then (the same rows set again) by subscription only, as the
        # worker reads while the endpoints that made its last walk meet its bound stay
        # full: both claim what the brute-force pass does.
        for walk in (True, False):
            if not walk:
                await _set(webhook_db, updates, oldest)
            got = await _until_none(webhook_db, replace(claim, walk=walk), rows)
            if pending_only:
                assert sorted(got) == sorted(want), (trial, walk)
            else:
                # Two statuses are read apart, so which of an endpoint's rows come first
                # may differ; how many are claimed at each endpoint may not.
                assert sorted(_count(rows, got).items()) == \
                    sorted(_count(rows, want).items()), (trial, walk)
                assert set(got) <= {r.id for r in rows
                                    if _claimable(r, claim) and r.subscription not in excluded}
        due = sum(1 for r in rows if _claimable(r, claim))
        paths.add(due > claim.limit * 2)
    assert paths == {True, False}  # both more due rows than a read and fewer were tried


async def _set(db: Database, updates: list[tuple[str, str, float | None, float | None, int,
                                                 int]], oldest: str) -> None:
    """Every row's drawn state; ``oldest``'s rows made the oldest by far."""
    await _apply(db, updates)
    if oldest:
        await db.execute(
            "UPDATE webhook_deliveries SET next_attempt_at = next_attempt_at - 10000"
            " WHERE next_attempt_at IS NOT NULL AND subscription_id IN"
            " (SELECT id FROM webhook_subscriptions WHERE endpoint = $1)", oldest)


def _claimable(r: Row, claim: ClaimRequest) -> bool:
    return (r.status in ("pending", "failed") and r.next_attempt_at is not None
            and r.next_attempt_at <= claim.now
            and (r.lease_until is None or r.lease_until < claim.now))


def _count(rows: list[Row], ids: list[str]) -> dict[str, int]:
    endpoint = {r.id: r.endpoint for r in rows}
    counts: dict[str, int] = {}
    for i in ids:
        counts[endpoint[i]] = counts.get(endpoint[i], 0) + 1
    return counts


async def _apply(db: Database, updates: list[tuple[str, str, float | None, float | None,
                                                   int, int]]) -> None:
    async with db.transaction() as tx:
        await tx.executemany(
            "UPDATE webhook_deliveries SET status = $2, next_attempt_at = $3,"
            " lease_until = $4, lease_token = $7,"
            " attempts = $5, created_at = $6 WHERE id = $1",
            [(d, s, a, lease, n, float(i), None if lease is None else "x")
             for d, s, a, lease, n, i in updates])


def test_json_text_is_read_back_by_json_each_as_the_same_strings() -> None:
    """The due read hands SQLite its id and endpoint lists as JSON text; quotes,
    backslashes, control and non-ASCII characters come back from ``json_each`` as given."""
    import sqlite3

    from monitor.storage.due_read import json_text

    values = ["a\"b", "back\\slash", "tab\tnew\nline", "ü-xn--bcher", "127.0.0.1:8443", ""]
    conn = sqlite3.connect(":memory:")
    try:
        got = [r[0] for r in conn.execute("SELECT value FROM json_each(?1)",
                                          (json_text(values),))]
    finally:
        conn.close()
    assert got == values
    assert json_text([]) == "[]"
