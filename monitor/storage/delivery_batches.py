"""The delivery worker's bookkeeping: one transaction per cycle, whatever its size.

Same rules as :meth:`DeliveryStore.begin_attempt` and :meth:`DeliveryStore.record_attempt`
(count an attempt before its request goes out; record an outcome only while the claim
is held and the delivery is not already a success), applied to many deliveries at once:
a cycle records every outcome that finished since the last one AND claims the next due
deliveries (counting one attempt for each) in a single transaction, so a busy worker
pays one commit for many sends, not two per send.

The due rows are read inside that write transaction (SQLite's ``BEGIN IMMEDIATE``
excludes other writers; PostgreSQL locks them ``FOR UPDATE ... SKIP LOCKED``, so two
workers never claim the same row), so what is claimed is exactly what is due at that
moment. Whether an outcome's claim is still held is decided by the UPDATE itself (its
row count on SQLite, ``RETURNING`` on PostgreSQL).

SQLite runs the whole cycle in one go, on the event loop's thread or, for a busy
worker's big cycles, in one hop to a thread of its own
(:meth:`~monitor.storage.sqlite.SqliteDatabase.run_sync`, :data:`SQLITE_THREAD_AT`);
PostgreSQL runs the cycle as ONE statement whose text never varies with the batch size
(the outcomes and the claim's values as arrays; asyncpg prepares it
once) on a connection kept for it (:mod:`~monitor.storage.delivery_cycle_pg`): one round
trip per cycle.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .db import Database
from .deliveries import _DUE_SELECT, INTERRUPTED, DueDelivery
from .delivery_cycle_pg import columns, outcome_columns, pg_cycle
from .due_read import (
    ClaimRequest,
    full_endpoints,
    json_text,
    per_subscription,
    read_rows,
    sqlite_due_ids,
    walk_rows,
)
from .postgres import PostgresDatabase


class Outcome(NamedTuple):
    """One finished send, as :meth:`DeliveryStore.record_attempt` takes it (a named
    tuple: one is built per send, at a fraction of a frozen dataclass's cost)."""

    delivery: DueDelivery
    token: str
    attempt: int
    started_at: float
    status_code: int | None
    latency_ms: float
    error: str | None
    new_status: str
    next_attempt_at: float | None
    now: float


@dataclass
class CycleResult:
    #: Ids of the outcomes recorded (the others' claims were lost, or already a success).
    recorded: set[str] = field(default_factory=set)
    #: Claimed with one attempt counted: (delivery, attempt number); send these.
    claimed: list[tuple[DueDelivery, int]] = field(default_factory=list)
    #: Due but with every attempt used by interrupted sends: now max_retries_exceeded.
    exhausted: list[DueDelivery] = field(default_factory=list)
    #: The due read returned all it asked for: more may be due right now.
    more_due: bool = False
    #: The due read read by subscription: a walk met its bound short of the claim (a
    #: backlog of endpoints without room), or the claim asked for no walk.
    by_subscription: bool = False


def _outcome_row(o: Outcome) -> tuple[Any, ...]:
    completed = float(o.now) if o.new_status in ("success", "max_retries_exceeded") else None
    # A success's start and latency stay on its delivery's row: it gets no history row.
    success = o.new_status == "success"
    return (o.delivery.id, o.token, o.new_status, o.attempt,
            None if o.next_attempt_at is None else float(o.next_attempt_at),
            o.status_code, o.error, float(o.now), completed,
            float(o.started_at) if success else None,
            float(o.latency_ms) if success else None)


def _outcome_records(outcomes: Sequence[Outcome]) -> tuple[list[str], tuple[str, ...]]:
    """The PostgreSQL cycle's outcomes: their ids, and their other values in
    :data:`~monitor.storage.delivery_cycle_pg.OUTCOME_COLUMNS` order as
    :func:`~monitor.storage.delivery_cycle_pg.outcome_columns` (the statement derives
    ``completed_at`` from the status, as :func:`_outcome_row` does)."""
    rows = [(o.token, o.new_status, o.attempt,
             None if o.next_attempt_at is None else float(o.next_attempt_at), o.status_code,
             o.error, float(o.now), float(o.started_at), float(o.latency_ms))
            for o in outcomes]
    return [o.delivery.id for o in outcomes], outcome_columns(rows)


def _history_row(o: Outcome) -> tuple[Any, ...]:
    return (o.delivery.seq, o.delivery.id, o.attempt, float(o.started_at), o.status_code,
            float(o.latency_ms), o.error)


def _due_from(row: Sequence[Any]) -> DueDelivery:
    """A delivery from a row of ``_DUE_SELECT`` (in :data:`~.deliveries.DUE_ROW`'s order:
    ..., d.created_at, d.next_attempt_at, s.webhook_url, ..., e.payload, d.seq)."""
    return DueDelivery(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[9], row[10],
        row[11], row[12], row[13], row[14].encode("utf-8"), row[15])


# -- SQLite: the whole cycle as one synchronous function on the connection's thread ----
#: The due read in two steps: the candidates' ids (:func:`~.due_read.sqlite_due_ids`),
#: then the whole rows of the picked ones only (the event payload and the subscription's
#: secrets are most of a row's cost).
_SQLITE_DUE_ROWS = _DUE_SELECT + " WHERE d.id IN (SELECT value FROM json_each(?1))"
_OUTCOME_SQL = (
    "UPDATE webhook_deliveries SET status = ?3, attempts = ?4, next_attempt_at = ?5,"
    " last_status_code = ?6, last_error = ?7, updated_at = ?8,"
    " completed_at = COALESCE(?9, completed_at), success_started_at = ?10,"
    " success_latency_ms = ?11, lease_token = NULL, lease_until = NULL"
    " WHERE id = ?1 AND lease_token = ?2 AND status <> 'success'"
)
_HISTORY_SQL = (
    "INSERT INTO webhook_attempts (delivery_seq, delivery_id, attempt, manual, started_at,"
    " status_code, latency_ms, error) VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6, ?7)"
    " ON CONFLICT (delivery_seq, attempt) DO UPDATE SET status_code = excluded.status_code,"
    " latency_ms = excluded.latency_ms, error = excluded.error"
)
_BEGIN_SQL = (
    "UPDATE webhook_deliveries SET lease_token = ?2, lease_until = ?3, attempts = ?4,"
    " updated_at = ?5 WHERE id = ?1"
)
#: The history row of an earlier attempt that never got one: its sender stopped before
#: recording the outcome (a crash). Written when the delivery is next claimed or given up,
#: never for the attempt about to be sent (see :func:`_earlier_attempts`).
_INTERRUPTED_SQL = (
    "INSERT INTO webhook_attempts (delivery_seq, delivery_id, attempt, manual, started_at,"
    " status_code, latency_ms, error) VALUES (?1, ?2, ?3, 0, ?4, NULL, 0, ?5)"
    " ON CONFLICT (delivery_seq, attempt) DO NOTHING"
)
_GIVE_UP_SQL = (
    "UPDATE webhook_deliveries SET status = 'max_retries_exceeded', next_attempt_at = NULL,"
    " updated_at = ?2, completed_at = ?2, lease_token = NULL, lease_until = NULL,"
    " last_error = COALESCE(last_error, ?3) WHERE id = ?1"
)


#: Outcomes from which a cycle runs on a thread of its own rather than on the event loop
#: (:meth:`~monitor.storage.sqlite.SqliteDatabase.run_sync`): that many sends finished since
#: the last cycle say a busy worker, whose sends and answers go on meanwhile (a drain's
#: cycles carry 25-50). A quiet worker's cycles (one or two outcomes) stay on the loop:
#: the hop to the thread and back would cost more CPU than they do.
SQLITE_THREAD_AT = 16


def _sqlite_cycle(conn: sqlite3.Connection, outcomes: Sequence[Outcome],
                  claim: ClaimRequest | None) -> CycleResult:
    result = CycleResult()
    if outcomes:
        result.recorded = _record_outcomes(conn, outcomes)
    if result.recorded:
        # A success's history is its delivery's row (webhooks_schema, version 6).
        conn.executemany(_HISTORY_SQL, [_history_row(o) for o in outcomes
                                        if o.delivery.id in result.recorded
                                        and o.new_status != "success"])
    if claim is None or claim.limit <= 0:
        return result
    picked, result.more_due, result.by_subscription = sqlite_due_ids(conn, claim)
    if picked:
        by_id = {row[0]: row for row in
                 conn.execute(_SQLITE_DUE_ROWS, (json_text(picked),)).fetchall()}
        _claim_picked(result, [_due_from(by_id[i]) for i in picked], claim)
    if result.claimed:
        conn.executemany(_BEGIN_SQL, [(d.id, claim.token, claim.lease_until, n, claim.now)
                                      for d, n in result.claimed])
    if result.exhausted:
        conn.executemany(_GIVE_UP_SQL, [(d.id, claim.now, INTERRUPTED)
                                        for d in result.exhausted])
    earlier = _earlier_attempts(result)
    if earlier:
        conn.executemany(_INTERRUPTED_SQL, [(d.seq, d.id, n, claim.now, INTERRUPTED)
                                            for d, n in earlier])
    return result


def _record_outcomes(conn: sqlite3.Connection, outcomes: Sequence[Outcome]) -> set[str]:
    """Ids of the outcomes written: those whose claim this worker still held.

    Usually all of them, so they go in one ``executemany`` and its row count says so.
    When it says otherwise (a claim lost to an expired lease, a delivery already a
    success), the batch is undone and written row by row, each row count telling."""
    rows = [_outcome_row(o) for o in outcomes]
    conn.execute("SAVEPOINT outcomes")
    if conn.executemany(_OUTCOME_SQL, rows).rowcount == len(rows):
        conn.execute("RELEASE outcomes")
        return {o.delivery.id for o in outcomes}
    conn.execute("ROLLBACK TO outcomes")
    conn.execute("RELEASE outcomes")
    return {o.delivery.id for o, row in zip(outcomes, rows, strict=True)
            if conn.execute(_OUTCOME_SQL, row).rowcount}


def _earlier_attempts(result: CycleResult) -> list[tuple[DueDelivery, int]]:
    """(delivery, attempt) of the last counted attempt of every delivery claimed again or
    given up in this cycle; its history row is written as interrupted unless it has one.

    An attempt is counted (``attempts``) at its claim, before it is sent, but its history
    row is written only with its outcome: during a send the history does not list an
    attempt whose outcome is not known. If the sender crashed, the delivery is claimed
    again after its lease (or given up, its attempts used): the attempt counted then is
    the one before, and it gets its "interrupted" row here. A first claim (attempts 0),
    the common case, writes nothing."""
    earlier = [(d, n - 1) for d, n in result.claimed if n > 1]
    earlier += [(d, d.attempts) for d in result.exhausted if d.attempts > 0]
    return earlier


def _claim_picked(result: CycleResult, picked: Sequence[DueDelivery],
                  claim: ClaimRequest) -> None:
    for d in picked:
        if d.attempts >= claim.max_attempts:
            result.exhausted.append(d)
        else:
            result.claimed.append((d, d.attempts + 1))


async def run_cycle(db: Database, outcomes: Sequence[Outcome], claim: ClaimRequest | None
                    ) -> CycleResult:
    """Record ``outcomes`` and make ``claim``, atomically (see the module docstring)."""
    if not outcomes and (claim is None or claim.limit <= 0):
        return CycleResult()
    run_sync = getattr(db, "run_sync", None)
    if run_sync is not None:
        result: CycleResult = await run_sync(lambda conn: _sqlite_cycle(conn, outcomes, claim),
                                             on_thread=len(outcomes) >= SQLITE_THREAD_AT)
        return result
    assert isinstance(db, PostgresDatabase)
    outcome_ids, outcome_values = _outcome_records(outcomes)
    pg_claim = None
    if claim is not None and claim.limit <= 0:
        claim = None
    if claim is not None:
        room = sorted(claim.room.items())
        pg_claim = (claim.now, read_rows(claim), full_endpoints(claim),
                    [e for e, _ in room], [n for _, n in room], claim.default_room,
                    claim.limit, claim.token, claim.lease_until, claim.max_attempts,
                    per_subscription(claim), walk_rows(claim))
    recorded, picked, pending, failed, beyond = await pg_cycle(db, outcome_ids,
                                                               outcome_values, pg_claim)
    result = CycleResult(recorded=recorded)
    if claim is not None:
        result.more_due = max(pending, failed) >= read_rows(claim)
        result.by_subscription = beyond
        _claim_picked(result, [d for _, d in picked], claim)
    return result


# -- giving back what was claimed but never sent ------------------------------------------
_SQLITE_UNCOUNT = (
    "UPDATE webhook_deliveries SET attempts = attempts - 1, lease_token = NULL,"
    " lease_until = NULL WHERE id = ?1 AND lease_token = ?2 AND attempts = ?3"
    " AND status IN ('pending', 'failed')"
)


async def release_unsent(db: Database, unsent: Sequence[tuple[DueDelivery, str, int]]
                         ) -> int:
    """Give back deliveries claimed (attempt counted) but never sent, on a clean stop:
    the attempt is uncounted, as if never claimed (it has no history row yet: that is
    written with its outcome). ``unsent``: (delivery, token, attempt number). Returns how many."""
    if not unsent:
        return 0
    rows = [(d.id, token, n) for d, token, n in unsent]
    run_sync = getattr(db, "run_sync", None)
    if run_sync is not None:
        def work(conn: sqlite3.Connection) -> int:
            released = 0
            for row in rows:
                released += conn.execute(_SQLITE_UNCOUNT, row).rowcount
            return released

        count: int = await run_sync(work)
        return count
    async with db.transaction() as tx:
        ids = await tx.fetch(
            "UPDATE webhook_deliveries d SET attempts = d.attempts - 1, lease_token = NULL,"
            " lease_until = NULL FROM unnest($1::text[], $2::text[], $3::int[])"
            " AS v(id, token, n) WHERE d.id = v.id AND d.lease_token = v.token"
            " AND d.attempts = v.n AND d.status IN ('pending', 'failed') RETURNING d.id",
            *columns(rows, 3))
        return len(ids)
