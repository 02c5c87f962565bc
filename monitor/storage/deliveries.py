"""Webhook events, deliveries and attempts: the durable side of the delivery worker.

Crash safety comes from four rules:

* one delivery per ``(subscription_id, event_id)``: its id is the UUIDv5 of the pair
  (:func:`delivery_id`, the only id a delivery is inserted under) and the primary key,
  so a replayed or re-consumed event creates nothing new;
* retries are rows with ``next_attempt_at``, not timers in memory, so they survive a
  restart or ``kill -9``;
* a sender first *claims* a delivery (``lease_token`` + ``lease_until``), and records the
  attempt only while it still holds that claim and the delivery is not already a success —
  no two workers send it at once, and no delivery is recorded a success twice;
* an attempt is counted *before* its request is sent (:meth:`DeliveryStore.begin_attempt`:
  its row says "interrupted" until the outcome replaces it), so a worker killed mid-send
  has still used one of the ``max_attempts``: a crash-looping worker cannot send a
  delivery more than ``max_attempts`` times.

The attempt history is ``webhook_attempts``, but for one attempt: a success the
worker's cycle records is the delivery's last, and its start and latency are kept on the
delivery's row (``success_started_at``, ``success_latency_ms``) instead of a history row
of its own; :meth:`DeliveryStore.attempts` reads both as one history.

Statuses: ``pending`` (no attempt yet), ``failed`` (last attempt failed, another is
scheduled), ``success``, ``max_retries_exceeded`` (attempts used up) and ``cancelled``
(its subscription was deleted).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .db import Database, Row
from .sqlite import SqliteDatabase
from .webhooks import Subscription, charge

DELIVERY_NAMESPACE = uuid.UUID("0b9c2f7a-41d2-4b6e-8f0e-5c3a7d9e1f20")
RETRYABLE = ("pending", "failed")
#: The history of an attempt whose sender died before recording the outcome.
INTERRUPTED = "interrupted: the sender stopped before the outcome was recorded"
STATUSES = ("pending", "success", "failed", "max_retries_exceeded", "cancelled")


def delivery_id(subscription_id: str, event_id: str) -> str:
    return str(uuid.uuid5(DELIVERY_NAMESPACE, f"{subscription_id}|{event_id}"))


class DueDelivery(NamedTuple):
    """Everything needed to send one delivery, read in one query. A named tuple, not a
    frozen dataclass: the worker builds one per delivery claimed, and a frozen
    dataclass's ``__init__`` (one ``object.__setattr__`` per field) cost ~2.3 µs of the
    worker's CPU per delivery against ~0.35 µs."""

    id: str
    subscription_id: str
    api_key_id: str
    event_id: str
    event_type: str
    status: str
    attempts: int
    created_at: float
    webhook_url: str
    endpoint: str
    secret_sealed: str
    previous_secret_sealed: str | None
    rotated_at: float | None
    payload: bytes
    #: The delivery's sequence number (``webhook_deliveries.seq``): its history rows'
    #: key (``webhook_attempts.delivery_seq``).
    seq: int


@dataclass(frozen=True)
class NewEvent:
    event_id: str
    event_type: str
    payload: bytes
    subscriptions: Sequence[Subscription]


#: A due delivery's row as every claim reads it, (table alias, column): ``d`` the
#: delivery, ``s`` its subscription, ``e`` its event. :class:`DueDelivery`'s fields in
#: order, with ``next_attempt_at`` after ``created_at``; the cycles' readers take the
#: row by position (``delivery_batches._due_from``, ``delivery_cycle_pg.pg_cycle``).
DUE_ROW = (("d", "id"), ("d", "subscription_id"), ("d", "api_key_id"), ("d", "event_id"),
           ("d", "event_type"), ("d", "status"), ("d", "attempts"), ("d", "created_at"),
           ("d", "next_attempt_at"), ("s", "webhook_url"), ("s", "endpoint"),
           ("s", "secret_sealed"), ("s", "previous_secret_sealed"), ("s", "rotated_at"),
           ("e", "payload"), ("d", "seq"))
_DUE_COLUMNS = "SELECT " + ", ".join(f"{table}.{column}" for table, column in DUE_ROW)
_DUE_SELECT = (
    _DUE_COLUMNS + " FROM webhook_deliveries d"
    " JOIN webhook_subscriptions s ON s.id = d.subscription_id"
    " JOIN webhook_events e ON e.event_id = d.event_id"
)

_DELIVERY_COLUMNS = (
    "id, subscription_id, event_id, event_type, status, attempts, next_attempt_at,"
    " last_status_code, last_error, last_manual_retry_at, created_at, updated_at, completed_at"
)


def _due(row: Row) -> DueDelivery:
    fields = {**row, "payload": row["payload"].encode("utf-8")}
    fields.pop("next_attempt_at", None)
    return DueDelivery(**fields)


#: SQLite's inserts of :meth:`DeliveryStore.record_events` (run on the sqlite3
#: connection itself, so in its own ``?n`` markers).
_EVENT_INSERT = ("INSERT INTO webhook_events (event_id, event_type, payload, received_at)"
                 " VALUES (?1, ?2, ?3, ?4) ON CONFLICT (event_id) DO NOTHING")
#: A new delivery's number is one past the highest (the ``webhook_deliveries_seq`` index's
#: last entry), taken inside the intake's write transaction: SQLite has no sequences
#: (webhooks_schema, version 5). A row the conflict leaves out uses no number.
_DELIVERY_INSERT = (
    "INSERT INTO webhook_deliveries (id, subscription_id, api_key_id, event_id, event_type,"
    " status, attempts, next_attempt_at, created_at, updated_at, seq)"
    " VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, ?6, ?6, ?6,"
    " (SELECT COALESCE(MAX(seq), 0) + 1 FROM webhook_deliveries)) ON CONFLICT (id) DO NOTHING")
_LEDGER_INSERT = ("INSERT INTO cu_ledger (id, api_key_id, kind, ref, units, created_at)"
                  " VALUES (?1, ?2, 'delivery', ?3, 1, ?4) ON CONFLICT (kind, ref) DO NOTHING")
#: :meth:`DeliveryStore.record_events` on PostgreSQL. The inserts run as one statement's
#: parts: the deliveries' foreign key to their event is checked at the statement's end,
#: when the events are in. A key met twice (an event repeated within a batch, a delivery
#: already there) is left as it is, as the row-by-row inserts did.
_PG_RECORD = """
WITH events AS (
  INSERT INTO webhook_events (event_id, event_type, payload, received_at)
  SELECT e.event_id, e.event_type, e.payload, $1
  FROM unnest($2::text[], $3::text[], $4::text[]) AS e (event_id, event_type, payload)
  ON CONFLICT (event_id) DO NOTHING
), added AS (
  INSERT INTO webhook_deliveries (id, subscription_id, api_key_id, event_id, event_type,
    status, attempts, next_attempt_at, created_at, updated_at)
  SELECT d.id, d.subscription_id, d.api_key_id, d.event_id, d.event_type, 'pending', 0,
    $1, $1, $1
  FROM unnest($5::text[], $6::text[], $7::text[], $8::text[], $9::text[])
    AS d (id, subscription_id, api_key_id, event_id, event_type)
  ON CONFLICT (id) DO NOTHING
  RETURNING 1
), charged AS (
  INSERT INTO cu_ledger (id, api_key_id, kind, ref, units, created_at)
  SELECT c.id, c.api_key_id, 'delivery', c.ref, 1, $1
  FROM unnest($10::text[], $7::text[], $5::text[]) AS c (id, api_key_id, ref)
  ON CONFLICT (kind, ref) DO NOTHING
)
SELECT COUNT(*) FROM added
"""
#: Delivery rows from which SQLite's insert of an intake batch runs on run_sync's thread
#: rather than on the event loop's: the loop's thread is the worker's too, and a batch
#: written there holds every send's answer for as long as it takes. Below this the hop
#: to the thread costs more than it saves (``benchmarks/bench_sqlite_batches.py``
#: measured the hop for the worker's cycle: ~100-150 µs of CPU).
SQLITE_RECORD_THREAD_AT = 256


def _sqlite_record(conn: sqlite3.Connection, event_rows: Sequence[tuple[Any, ...]],
                   deliveries: Sequence[tuple[Any, ...]],
                   ledger: Sequence[tuple[Any, ...]]) -> int:
    """:meth:`DeliveryStore.record_events` on SQLite, inside run_sync's transaction. The
    deliveries' insert counts only the rows it added (a conflict's DO NOTHING changes
    none), so no count before and after is needed."""
    conn.executemany(_EVENT_INSERT, event_rows)
    if not deliveries:
        return 0
    created = conn.executemany(_DELIVERY_INSERT, deliveries).rowcount
    conn.executemany(_LEDGER_INSERT, ledger)
    return created


class DeliveryStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def record_events(self, events: Sequence[NewEvent], now: float) -> int:
        """Store events and one pending delivery per matching subscription, charging 1 CU
        per new delivery, in one transaction. Returns how many deliveries are new (a
        replayed event's existing deliveries do not count)."""
        now = float(now)
        event_rows = [(e.event_id, e.event_type, e.payload.decode("utf-8"), now) for e in events]
        deliveries: list[tuple[Any, ...]] = []
        for e in events:
            for sub in e.subscriptions:
                deliveries.append((delivery_id(sub.id, e.event_id), sub.id, sub.api_key_id,
                                   e.event_id, e.event_type, now))
        # A ledger row's id per delivery, used only for the deliveries that are new.
        ledger_ids = [str(uuid.uuid4()) for _ in deliveries]
        if isinstance(self.db, SqliteDatabase):
            ledger = [(lid, d[2], d[0], now) for lid, d in zip(ledger_ids, deliveries,
                                                                strict=True)]
            # One transaction in one go (run_sync), not a hop to aiosqlite's thread per
            # statement: the intake's seven hops cost ~1 ms of an event's way to its
            # receivers, and their waits for the GIL were most of its slowest deliveries
            # (docs/performance.md, thirty-seventh pass). A big batch goes to a thread.
            created: int = await self.db.run_sync(
                lambda conn: _sqlite_record(conn, event_rows, deliveries, ledger),
                on_thread=len(deliveries) >= SQLITE_RECORD_THREAD_AT)
            return created
        # PostgreSQL: ONE statement, one round trip (its text never varies, so asyncpg
        # prepares it once), where a transaction of three inserts and two counts took
        # seven. The deliveries' insert returns only the rows it added.
        ids = [d[0] for d in deliveries]
        created = await self.db.fetchval(
            _PG_RECORD, now, [r[0] for r in event_rows], [r[1] for r in event_rows],
            [r[2] for r in event_rows], ids, [d[1] for d in deliveries],
            [d[2] for d in deliveries], [d[3] for d in deliveries], [d[4] for d in deliveries],
            ledger_ids)
        return int(created or 0)

    async def due(self, now: float, limit: int, exclude_endpoints: Sequence[str] = ()
                  ) -> list[DueDelivery]:
        """Deliveries whose time has come, oldest first, skipping saturated endpoints.

        Read by subscription: each active one's oldest ``limit`` due rows (the
        ``(subscription_id, next_attempt_at)`` index), then the oldest of those. A walk of
        the due index with the endpoint filter in it would pass every row of a saturated
        endpoint first (a hanging one's backlog is the oldest). The worker's cycle reads
        with :mod:`~monitor.storage.due_read`; this serves one-off reads."""
        args: list[Any] = [float(now), int(limit)]
        excluded = ""
        if exclude_endpoints:
            marks = ", ".join(f"${i + 3}" for i in range(len(exclude_endpoints)))
            excluded = f" AND s.endpoint NOT IN ({marks})"
            args.extend(exclude_endpoints)
        oldest = ("SELECT x.{} FROM webhook_deliveries x WHERE x.subscription_id = s.id"
                  " AND x.next_attempt_at <= $1 AND x.status IN ('pending', 'failed')"
                  " AND (x.lease_until IS NULL OR x.lease_until < $1)"
                  " ORDER BY x.next_attempt_at LIMIT $2")
        # SQLite drives a correlated IN list as the join; PostgreSQL needs LATERAL for it.
        source = (f"CROSS JOIN LATERAL ({oldest.format('*')}) d"
                  if self.db.dialect == "postgresql"
                  else f"JOIN webhook_deliveries d ON d.id IN ({oldest.format('id')})")
        rows = await self.db.fetch(
            _DUE_COLUMNS + f" FROM webhook_subscriptions s {source}"
            " JOIN webhook_events e ON e.event_id = d.event_id"
            " WHERE s.is_active = 1 AND s.deleted_at IS NULL"
            " AND s.api_key_id IN (SELECT id FROM api_keys WHERE revoked_at IS NULL)"
            + excluded, *args)
        rows.sort(key=lambda r: (r["next_attempt_at"], r["id"]))
        return [_due(r) for r in rows[:limit]]

    async def load(self, delivery_id: str) -> DueDelivery | None:
        row = await self.db.fetchrow(_DUE_SELECT + " WHERE d.id = $1", delivery_id)
        return _due(row) if row else None

    async def claim(self, delivery_id: str, token: str, now: float, lease_until: float,
                    statuses: Sequence[str] = RETRYABLE) -> bool:
        marks = ", ".join(f"'{s}'" for s in statuses if s in STATUSES)
        row = await self.db.fetchrow(
            "UPDATE webhook_deliveries SET lease_token = $2, lease_until = $4"
            f" WHERE id = $1 AND status IN ({marks})"
            " AND (lease_until IS NULL OR lease_until < $3) RETURNING id",
            delivery_id, token, float(now), float(lease_until))
        return row is not None

    async def claim_many(self, delivery_ids: Sequence[str], token: str, now: float,
                         lease_until: float) -> set[str]:
        """Claim several due deliveries in one statement; returns the ids now held."""
        if not delivery_ids:
            return set()
        marks = ", ".join(f"${i + 4}" for i in range(len(delivery_ids)))
        rows = await self.db.fetch(
            "UPDATE webhook_deliveries SET lease_token = $1, lease_until = $3"
            f" WHERE id IN ({marks}) AND status IN ('pending', 'failed')"
            " AND (lease_until IS NULL OR lease_until < $2) RETURNING id",
            token, float(now), float(lease_until), *delivery_ids)
        return {r["id"] for r in rows}

    async def begin_attempt(self, delivery: DueDelivery, token: str, manual: bool,
                            started_at: float) -> int | None:
        """Count the attempt about to be sent, before it is sent; its number, or None when
        the claim was lost (then nothing is sent). Its history row reads as interrupted
        until :meth:`record_attempt` stores the outcome."""
        async with self.db.transaction() as tx:
            row = await tx.fetchrow(
                "UPDATE webhook_deliveries SET attempts = attempts + 1, updated_at = $3"
                " WHERE id = $1 AND lease_token = $2 AND status <> 'success' RETURNING attempts",
                delivery.id, token, float(started_at))
            if row is None:
                return None
            attempt = int(row["attempts"])
            await tx.execute(
                "INSERT INTO webhook_attempts (delivery_seq, delivery_id, attempt, manual,"
                " started_at, status_code, latency_ms, error)"
                " VALUES ($1, $2, $3, $4, $5, NULL, 0, $6)",
                delivery.seq, delivery.id, attempt, 1 if manual else 0, float(started_at),
                INTERRUPTED)
        return attempt

    async def give_up(self, delivery: DueDelivery, token: str, now: float) -> bool:
        """Mark a claimed delivery ``max_retries_exceeded`` without another send (its
        attempts were used up by sends that crashed before recording an outcome)."""
        row = await self.db.fetchrow(
            "UPDATE webhook_deliveries SET status = 'max_retries_exceeded',"
            " next_attempt_at = NULL, updated_at = $3, completed_at = $3, lease_token = NULL,"
            " lease_until = NULL, last_error = COALESCE(last_error, $4)"
            " WHERE id = $1 AND lease_token = $2 AND status <> 'success' RETURNING id",
            delivery.id, token, float(now), INTERRUPTED)
        return row is not None

    async def record_attempt(
        self, *, delivery: DueDelivery, token: str, manual: bool, started_at: float,
        status_code: int | None, latency_ms: float, error: str | None, new_status: str,
        next_attempt_at: float | None, now: float, attempt: int | None = None,
    ) -> bool:
        """Record one attempt's outcome and the delivery's new state; False if the claim
        was lost. ``attempt``: the number :meth:`begin_attempt` gave (its row is updated);
        without it the attempt is counted here."""
        attempt = attempt if attempt is not None else delivery.attempts + 1
        completed = float(now) if new_status in ("success", "max_retries_exceeded") else None
        async with self.db.transaction() as tx:
            updated = await tx.fetchrow(
                "UPDATE webhook_deliveries SET status = $3, attempts = $4, next_attempt_at = $5,"
                " last_status_code = $6, last_error = $7, updated_at = $8,"
                " completed_at = COALESCE($9, completed_at), lease_token = NULL,"
                " lease_until = NULL"
                " WHERE id = $1 AND lease_token = $2 AND status <> 'success' RETURNING id",
                delivery.id, token, new_status, attempt,
                None if next_attempt_at is None else float(next_attempt_at),
                status_code, error, float(now), completed)
            if updated is None:
                return False
            await tx.execute(
                "INSERT INTO webhook_attempts (delivery_seq, delivery_id, attempt, manual,"
                " started_at, status_code, latency_ms, error)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
                " ON CONFLICT (delivery_seq, attempt) DO UPDATE SET"
                " status_code = excluded.status_code, latency_ms = excluded.latency_ms,"
                " error = excluded.error",
                delivery.seq, delivery.id, attempt, 1 if manual else 0, float(started_at),
                status_code, float(latency_ms), error)
        return True

    async def release(self, delivery_id: str, token: str) -> None:
        await self.db.execute(
            "UPDATE webhook_deliveries SET lease_token = NULL, lease_until = NULL"
            " WHERE id = $1 AND lease_token = $2", delivery_id, token)

    async def mark_manual_retry(self, api_key_id: str, delivery_id: str, now: float,
                                interval: float) -> bool:
        """Take the once-per-interval manual retry slot; False when it was taken recently."""
        row = await self.db.fetchrow(
            "UPDATE webhook_deliveries SET last_manual_retry_at = $3"
            " WHERE id = $1 AND api_key_id = $2"
            " AND (last_manual_retry_at IS NULL OR last_manual_retry_at <= $4) RETURNING id",
            delivery_id, api_key_id, float(now), float(now - interval))
        return row is not None

    async def backlog(self) -> tuple[int, int]:
        """(deliveries waiting for a retry, subscriptions with such a delivery)."""
        row = await self.db.fetchrow(
            "SELECT COUNT(*) AS waiting, COUNT(DISTINCT subscription_id) AS failing"
            " FROM webhook_deliveries WHERE status = 'failed'"
            # Always true of a failed delivery (its retry is scheduled); it lets the
            # partial due index answer, not a scan of the whole history.
            " AND next_attempt_at IS NOT NULL")
        return (int(row["waiting"]), int(row["failing"])) if row else (0, 0)

    async def prune(self, before: float) -> int:
        """Delete finished deliveries last updated before ``before`` (with their attempts)
        and events no delivery refers to any more; returns the deliveries deleted."""
        finished = ("status IN ('success', 'max_retries_exceeded', 'cancelled')"
                    " AND updated_at < $1")
        async with self.db.transaction() as tx:
            count = await tx.fetchval(
                f"SELECT COUNT(*) FROM webhook_deliveries WHERE {finished}", float(before))
            await tx.execute(
                "DELETE FROM webhook_attempts WHERE delivery_seq IN"
                f" (SELECT seq FROM webhook_deliveries WHERE {finished})", float(before))
            await tx.execute(f"DELETE FROM webhook_deliveries WHERE {finished}", float(before))
            await tx.execute(
                "DELETE FROM webhook_events WHERE received_at < $1 AND NOT EXISTS"
                " (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = webhook_events.event_id)",
                float(before))
        return int(count or 0)

    # -- reading (API) ----------------------------------------------------------------
    async def get(self, api_key_id: str, delivery_id: str) -> Row | None:
        return await self.db.fetchrow(
            f"SELECT {_DELIVERY_COLUMNS} FROM webhook_deliveries"
            " WHERE id = $1 AND api_key_id = $2", delivery_id, api_key_id)

    async def list_page(self, api_key_id: str, *, status: str | None = None,
                   event_type: str | None = None, subscription_id: str | None = None,
                   limit: int = 50, offset: int = 0) -> tuple[list[Row], int]:
        where = ["api_key_id = $1"]
        args: list[Any] = [api_key_id]
        for column, value in (("status", status), ("event_type", event_type),
                              ("subscription_id", subscription_id)):
            if value is not None:
                args.append(value)
                where.append(f"{column} = ${len(args)}")
        clause = " WHERE " + " AND ".join(where)
        total = await self.db.fetchval(f"SELECT COUNT(*) FROM webhook_deliveries{clause}", *args)
        rows = await self.db.fetch(
            f"SELECT {_DELIVERY_COLUMNS} FROM webhook_deliveries{clause}"
            f" ORDER BY created_at DESC, id LIMIT ${len(args) + 1} OFFSET ${len(args) + 2}",
            *args, int(limit), int(offset))
        return rows, int(total or 0)

    async def attempts(self, delivery_ids: Sequence[str]) -> dict[str, list[Row]]:
        found: dict[str, list[Row]] = {d: [] for d in delivery_ids}
        if not delivery_ids:
            return found
        marks = ", ".join(f"${i + 1}" for i in range(len(delivery_ids)))
        # From each delivery to its history by number (the history's key), not by the
        # history's delivery_id, which no index holds. A success the worker's cycle
        # recorded has no history row: its attempt is read from the delivery's own row
        # (its last attempt: nothing sends a success again), unless a row has it.
        rows = await self.db.fetch(
            "SELECT d.id AS delivery_id, a.attempt, a.manual, a.started_at, a.status_code,"
            " a.latency_ms, a.error FROM webhook_deliveries d"
            " JOIN webhook_attempts a ON a.delivery_seq = d.seq"
            f" WHERE d.id IN ({marks})"
            " UNION ALL SELECT d.id, d.attempts, 0, d.success_started_at, d.last_status_code,"
            " d.success_latency_ms, d.last_error FROM webhook_deliveries d"
            f" WHERE d.id IN ({marks}) AND d.success_started_at IS NOT NULL"
            " AND NOT EXISTS (SELECT 1 FROM webhook_attempts a"
            " WHERE a.delivery_seq = d.seq AND a.attempt = d.attempts)"
            " ORDER BY 1, 2", *delivery_ids)
        for row in rows:
            found[row["delivery_id"]].append(row)
        return found


__all__ = ["DeliveryStore", "DueDelivery", "NewEvent", "charge", "delivery_id"]
