"""Webhook schema version 5: deliveries are numbered, and their history is keyed by number.

A version-4 database is built with exactly the DDL of the migrations up to 4 and filled
as that release's stores did (raw statements: the stores' code is newer), then migrated.
What a user sees must not change: every delivery's history, read through the store, is
the one it had; new deliveries are numbered past the old ones, each once, also when two
writers record at the same time; and the history's key is one per (delivery, attempt).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from monitor.records import encode
from monitor.storage import Database, connect
from monitor.storage.db import migrate
from monitor.storage.deliveries import DeliveryStore, NewEvent, delivery_id
from monitor.storage.webhooks import Subscription, migrate_webhooks
from monitor.storage.webhooks_schema import COMPONENT, MIGRATIONS
from tests.webhook_support import tier_change
from tests.webhooks.schema_support import key_with_subscriptions, record_events_unnumbered

#: (attempt, manual, started_at, status_code, latency_ms, error) per delivery, in order.
History = dict[str, list[tuple[object, ...]]]


async def _version_4(db: Database) -> tuple[list[Subscription], list[str], History]:
    """Three events to two subscriptions (six deliveries) as version 4 recorded them, and
    a history: none for the first delivery, one attempt for the second, three for the
    others (the last of them manual, one interrupted), plus one row of a delivery that is
    gone."""
    assert await migrate(db, COMPONENT, [m for m in MIGRATIONS if m.version <= 4]) == 4
    subs = await key_with_subscriptions(db, 2)
    ids: list[str] = []
    for n in range(3):
        event = tier_change()
        await record_events_unnumbered(
            db, [NewEvent(event.event_id, event.event_type, encode(event), subs)], 100.0 + n)
        ids += [delivery_id(sub.id, event.event_id) for sub in subs]
    history: History = {did: [] for did in ids}
    for k, did in enumerate(ids[1:], start=1):
        for attempt in range(1, 2 if k == 1 else 4):
            row: tuple[object, ...] = (
                attempt, int(attempt == 3), 110.0 + k + attempt / 10,
                None if attempt == 2 else 500 + k, 5.0 + attempt,
                "interrupted" if attempt == 2 else f"HTTP {500 + k}")
            await db.execute("INSERT INTO webhook_attempts (delivery_id, attempt, manual,"
                             " started_at, status_code, latency_ms, error)"
                             " VALUES ($1, $2, $3, $4, $5, $6, $7)", did, *row)
            history[did].append(row)
    await db.execute("INSERT INTO webhook_attempts (delivery_id, attempt, manual, started_at,"
                     " status_code, latency_ms, error) VALUES ('gone', 1, 0, 1, 200, 1, NULL)")
    return subs, ids, history


def _read(found: dict[str, list[dict[str, object]]]) -> History:
    return {did: [(r["attempt"], r["manual"], r["started_at"], r["status_code"],
                   r["latency_ms"], r["error"]) for r in rows] for did, rows in found.items()}


async def _numbers(db: Database) -> dict[str, int]:
    return {r["id"]: r["seq"] for r in await db.fetch("SELECT id, seq FROM webhook_deliveries")}


async def test_version_5_keeps_every_history_and_numbers_every_delivery(
        storage_url: str) -> None:
    db = await connect(storage_url)
    try:
        subs, ids, history = await _version_4(db)
        assert await migrate_webhooks(db) == max(m.version for m in MIGRATIONS) >= 5
        store = DeliveryStore(db)

        # Every delivery reads the history it had, in order; the row of a delivery that
        # no longer exists is not carried over (nothing could read it).
        assert _read(await store.attempts(ids)) == history
        numbers = await _numbers(db)
        assert sorted(numbers) == sorted(ids)
        assert len(set(numbers.values())) == len(ids)
        assert all(isinstance(n, int) for n in numbers.values())
        rows = await db.fetch("SELECT delivery_seq, delivery_id FROM webhook_attempts")
        assert len(rows) == sum(len(h) for h in history.values())
        assert all(numbers[r["delivery_id"]] == r["delivery_seq"] for r in rows)

        # New deliveries are numbered past every old one, in the order they are made.
        events = [tier_change() for _ in range(2)]
        assert await store.record_events(
            [NewEvent(e.event_id, e.event_type, encode(e), subs) for e in events], 200.0) == 4
        after = await _numbers(db)
        new = [after[delivery_id(s.id, e.event_id)] for e in events for s in subs]
        assert min(new) > max(numbers.values())
        assert new == sorted(new) and len(set(new)) == len(new)
        # A replayed event makes nothing and renumbers nothing.
        assert await store.record_events(
            [NewEvent(e.event_id, e.event_type, encode(e), subs) for e in events], 300.0) == 0
        assert await _numbers(db) == after

        # One history row per (delivery, attempt): attempt 1 of another delivery is new,
        # attempt 1 of the same delivery again is refused.
        sql = ("INSERT INTO webhook_attempts (delivery_seq, delivery_id, attempt, manual,"
               " started_at, status_code, latency_ms, error)"
               " VALUES ($1, $2, 1, 0, 1, 200, 1, NULL)")
        await db.execute(sql, after[ids[0]], ids[0])
        with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
            await db.execute(sql, after[ids[1]], ids[1])

        # Pruning a finished delivery deletes its history, and only its.
        await db.execute("UPDATE webhook_deliveries SET status = 'success',"
                         " next_attempt_at = NULL, updated_at = 150 WHERE id = $1", ids[2])
        assert await store.prune(before=160.0) == 1
        left = _read(await store.attempts(ids))
        assert left[ids[2]] == []
        assert {d: h for d, h in left.items() if d != ids[2]} == {
            **{d: h for d, h in history.items() if d not in (ids[0], ids[2])},
            ids[0]: [(1, 0, 1.0, 200, 1.0, None)]}
        assert await migrate_webhooks(db) >= 5  # nothing left to do the second time
    finally:
        await db.close()


async def test_two_writers_on_one_sqlite_file_never_share_a_number(tmp_path: Path) -> None:
    """The intake numbers a delivery one past the highest inside its write transaction:
    two processes' workers recording at once (here two connections) each get their own."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    first, second = await connect(url), await connect(url)
    try:
        await migrate_webhooks(first)
        subs = await key_with_subscriptions(first, 3)

        async def record(db: Database, count: int) -> None:
            store = DeliveryStore(db)
            for _ in range(count):
                event = tier_change()
                await store.record_events(
                    [NewEvent(event.event_id, event.event_type, encode(event), subs)],
                    time.time())

        await asyncio.gather(record(first, 40), record(second, 40))
        numbers = list((await _numbers(first)).values())
        assert len(numbers) == 240
        assert sorted(numbers) == list(range(1, 241))
    finally:
        await first.close()
        await second.close()
