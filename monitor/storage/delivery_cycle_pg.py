"""The delivery worker's cycle on PostgreSQL: ONE statement, one round trip.

The cycle (see :mod:`~monitor.storage.delivery_batches`) used to be nine round trips on
PostgreSQL: BEGIN, the outcomes, their history, ``SET LOCAL``, two due reads, the claim,
COMMIT, and the pool's reset query when the connection went back. Under load each round
trip waits for the server process to be scheduled, so cycles (which run one at a time)
took ~20 ms, and a cycle claims only what the per-endpoint bounds leave room for: the
worker was bound by that latency, not by CPU. Now the whole cycle is one statement of
data-modifying CTEs (one implicit transaction: atomic as before) on a connection the
database object keeps for it (:meth:`~monitor.storage.postgres.PostgresDatabase.fetch_pinned`,
no acquire and reset per cycle).

What the CTEs do, in the order of the SQLite cycle:

* ``v``/``recorded``/``history``: the outcomes (one array literal per column,
  :func:`outcome_columns`); every one is written where the claim is still held and the
  delivery is not a success, and ``RETURNING`` gives its history row, written unless it
  is a success (a success's start and latency stay on its delivery's row);
* ``pending``/``failed``: the due rows of each status that can be claimed now, oldest
  first: a walk of the ``(status, next_attempt_at)`` index over rows no send holds,
  unlocked and bounded (``$14`` rows, whatever their subscription), joined back to the
  row by ``ctid`` (no second index lookup) and tested; the first ``read`` that pass are
  locked ``FOR UPDATE OF d SKIP LOCKED`` (two workers never claim the same row).
  Deliveries with an outcome in this cycle are left out: all CTEs see one snapshot, and
  one statement must not update a row twice;
* ``cut``/``beyond``/``due``: when a walk met its bound short of its rows (a hanging
  endpoint's backlog, all due and oldest, fills it) and the rows found do not fill the
  claim, each active subscription's oldest claimable rows are added (the
  ``(subscription_id, next_attempt_at)`` index), as the SQLite cycle does in a statement
  of its own. A claim without a walk (``$14`` = 0) meets that bound at once: it reads
  by subscription only. Whether it did is the cycle's last column;
* ``picked``: :func:`~monitor.storage.due_read.pick` in SQL: a row is taken when its rank
  within its endpoint is within that endpoint's room and it is among the first ``limit``
  such rows;
* ``begun``/``gave_up``/``interrupted``: one attempt counted for each picked delivery
  before anything is sent, or ``max_retries_exceeded`` when its attempts were all used by
  interrupted sends; the last counted attempt of a delivery taken again gets its
  "interrupted" history row unless it has one.

The final SELECT joins each picked row to its event's payload: the CTEs carry the rows
without it (their tuplestores and sorts copied every payload some eight times).

Data-modifying CTEs always run to completion whether or not the final SELECT reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from .deliveries import DUE_ROW, INTERRUPTED, DueDelivery
from .postgres import PostgresDatabase

#: A row can be claimed now. Rows with an outcome in this cycle are left out by
#: ``d.id <> ALL($1)``, but only where the lease has run out: such a row holds this
#: worker's claim, so its ``lease_until`` is set (a claim sets token and lease together,
#: everything else clears both), and a row whose lease is still running is left out by
#: the lease test already. A never-claimed row (``lease_until IS NULL``, every row of a
#: backlog) skips the comparison with each of the cycle's ~40 outcome ids (a generic plan
#: cannot hash a parameter array). Status and time are tested again: a row locked after
#: another worker changed it is re-tested in its newest version.
_CLAIMABLE = (
    " d.status IN ('pending', 'failed') AND d.next_attempt_at <= $3"
    " AND (d.lease_until IS NULL OR (d.lease_until < $3 AND d.id <> ALL($1::text[])))"
)
_ACTIVE = (
    " s.is_active = 1 AND s.deleted_at IS NULL AND s.endpoint <> ALL($5::text[])"
    " AND s.api_key_id IN (SELECT id FROM api_keys WHERE revoked_at IS NULL)"
)
#: A due row as the claim's CTEs carry it: :data:`~.deliveries.DUE_ROW` without the
#: event's payload, joined by the final SELECT to the picked rows only. Carried through
#: the reads, the ranking, the pick and their sorts, every payload was copied some eight
#: times.
_ROW = tuple((table, column) for table, column in DUE_ROW if table != "e")
_COLUMNS = ", ".join(column for _, column in _ROW)
_DUE_ROW = "SELECT " + ", ".join(f"{table}.{column}" for table, column in _ROW)
#: The final SELECT's row: ``DUE_ROW`` in its order, the payload from the event.
_PICKED_ROW = ", ".join("e.payload" if table == "e" else f"p.{column}"
                        for table, column in DUE_ROW)
_RANK = ("row_number() OVER (PARTITION BY w.endpoint ORDER BY w.next_attempt_at, w.id)"
         " AS rank, COALESCE(room.n, $8) AS room")
_ROOM = " LEFT JOIN unnest($6::text[], $7::int[]) AS room(e, n) ON room.e = w.endpoint"
#: A status's due rows no send holds, oldest first, at most ``$14`` of them: the walk of
#: the ``(status, next_attempt_at)`` index that the claim's read is bounded by (see the
#: SQLite walk in :mod:`~monitor.storage.due_read`). Nothing is locked here.
_WALK = ("SELECT ctid, next_attempt_at FROM webhook_deliveries WHERE status = '{}'"
         " AND next_attempt_at <= $3 AND (lease_until IS NULL OR lease_until < $3)"
         " ORDER BY next_attempt_at LIMIT $14")
#: A status's first ``$4`` claimable rows of that walk, walked only as far as needed,
#: each locked as it is taken (``SKIP LOCKED``: another worker's are passed over).
_DUE = (
    _DUE_ROW + " FROM ({walk}) w JOIN webhook_deliveries d ON d.ctid = w.ctid"
    " JOIN webhook_subscriptions s ON s.id = d.subscription_id"
    f" WHERE{_CLAIMABLE} AND{_ACTIVE} ORDER BY w.next_attempt_at LIMIT $4"
    " FOR UPDATE OF d SKIP LOCKED"
)
#: Whether a status's walk met its bound short of its ``$4`` rows: rows beyond it may be
#: claimable (evaluated only then: ``AND`` stops at its first false operand).
_CUT = ("((SELECT count(*) FROM {cte}) < $4 AND (SELECT count(*) FROM"
        " (SELECT 1 FROM webhook_deliveries WHERE status = '{status}'"
        " AND next_attempt_at <= $3 AND (lease_until IS NULL OR lease_until < $3)"
        " ORDER BY next_attempt_at LIMIT $14) x) >= $14)")
#: The rows beyond a walk that met its bound: each active subscription's oldest
#: claimable rows (``$13`` of them), for the endpoints the walks did not fill (see
#: :func:`~monitor.storage.due_read.filled`), when they did not fill the claim.
#: The first two tests name no row: one-time filters, evaluated before any subscription
#: is read, and in that order (whether a walk stopped at its bound is asked only when the
#: claim is not filled).
_BY_SUBSCRIPTION = (
    _DUE_ROW + " FROM webhook_subscriptions s"
    " CROSS JOIN LATERAL (SELECT d.* FROM webhook_deliveries d"
    f" WHERE d.subscription_id = s.id AND{_CLAIMABLE} ORDER BY d.next_attempt_at"
    " LIMIT $13 FOR UPDATE OF d SKIP LOCKED) d"
    f" WHERE (SELECT beyond FROM beyond) AND{_ACTIVE}"
    " AND s.endpoint NOT IN (SELECT endpoint FROM ranked1 WHERE rank >= room)"
    " AND d.id NOT IN (SELECT id FROM due1)"
)

CYCLE_SQL = (
    # The outcomes, one array literal per column (see OUTCOME_COLUMNS), ids as an array.
    "WITH v AS (SELECT unnest($1::text[]) AS id, unnest($2::text::text[]) AS token,"
    " unnest($16::text::text[]) AS status, unnest($17::text::int[]) AS attempt,"
    " unnest($18::text::float8[]) AS next_at, unnest($19::text::int[]) AS code,"
    " unnest($20::text::text[]) AS error, unnest($21::text::float8[]) AS now,"
    " unnest($22::text::float8[]) AS started, unnest($23::text::float8[]) AS latency),"
    " recorded AS (UPDATE webhook_deliveries d SET status = v.status, attempts = v.attempt,"
    " next_attempt_at = v.next_at, last_status_code = v.code, last_error = v.error,"
    " updated_at = v.now, completed_at = CASE WHEN v.status IN ('success',"
    " 'max_retries_exceeded') THEN v.now ELSE d.completed_at END,"
    " success_started_at = CASE WHEN v.status = 'success' THEN v.started END,"
    " success_latency_ms = CASE WHEN v.status = 'success' THEN v.latency END,"
    " lease_token = NULL, lease_until = NULL FROM v"
    " WHERE d.id = v.id AND d.lease_token = v.token AND d.status <> 'success'"
    " RETURNING d.id, d.seq, v.status, v.attempt, v.started, v.code, v.latency, v.error),"
    # A success's history is its delivery's row (webhooks_schema, version 6).
    " history AS (INSERT INTO webhook_attempts (delivery_seq, delivery_id, attempt, manual,"
    " started_at, status_code, latency_ms, error) SELECT seq, id, attempt, 0, started,"
    " code, latency, error FROM recorded WHERE status <> 'success'"
    " ON CONFLICT (delivery_seq, attempt) DO UPDATE SET status_code = excluded.status_code,"
    " latency_ms = excluded.latency_ms, error = excluded.error),"
    f" pending AS ({_DUE.format(walk=_WALK.format('pending'))}),"
    f" failed AS ({_DUE.format(walk=_WALK.format('failed'))}),"
    f" cut AS (SELECT {_CUT.format(cte='pending', status='pending')}"
    f" OR {_CUT.format(cte='failed', status='failed')} AS cut),"
    f" due1 AS (SELECT {_COLUMNS} FROM pending UNION ALL SELECT {_COLUMNS} FROM failed),"
    f" ranked1 AS (SELECT w.endpoint, {_RANK} FROM due1 w{_ROOM}),"
    " beyond AS (SELECT (SELECT count(*) FROM ranked1 WHERE rank <= room) < $9"
    " AND (SELECT cut FROM cut) AS beyond),"
    f" due AS (SELECT {_COLUMNS} FROM due1 UNION ALL {_BY_SUBSCRIPTION}),"
    f" ranked AS (SELECT w.*, {_RANK} FROM due w{_ROOM}),"
    f" picked AS (SELECT {_COLUMNS} FROM ranked WHERE rank <= room"
    " ORDER BY next_attempt_at, id LIMIT $9),"
    # The claim's UPDATEs reach their rows by primary key, not by the ctid the lock
    # returned: when another transaction updated a row after this statement's snapshot,
    # the lock follows it to the newest version, whose ctid the snapshot cannot see, and
    # a ctid join would update nothing (the delivery sent without its lease). The key
    # reaches the visible version and follows the update (docs/performance.md, 36th pass).
    " begun AS (UPDATE webhook_deliveries d SET lease_token = $10, lease_until = $11,"
    " attempts = p.attempts + 1, updated_at = $3 FROM picked p"
    " WHERE d.id = p.id AND p.attempts < $12),"
    " gave_up AS (UPDATE webhook_deliveries d SET status = 'max_retries_exceeded',"
    " next_attempt_at = NULL, updated_at = $3, completed_at = $3, lease_token = NULL,"
    " lease_until = NULL, last_error = COALESCE(d.last_error, $15) FROM picked p"
    " WHERE d.id = p.id AND p.attempts >= $12),"
    " interrupted AS (INSERT INTO webhook_attempts (delivery_seq, delivery_id, attempt,"
    " manual, started_at, status_code, latency_ms, error) SELECT p.seq, p.id, p.attempts, 0,"
    " $3, NULL, 0, $15 FROM picked p WHERE p.attempts > 0"
    " ON CONFLICT (delivery_seq, attempt) DO NOTHING)"
    # The picked rows, then ONE row of what the cycle recorded and read (NULL id, so
    # last in this order): the recorded ids once per cycle, not repeated in every picked
    # row (~40 ids in each of ~40 rows, sent and decoded each cycle).
    f" SELECT NULL AS recorded, NULL AS pending, NULL AS failed, {_PICKED_ROW},"
    " NULL AS beyond"
    " FROM picked p JOIN webhook_events e ON e.event_id = p.event_id"
    " UNION ALL SELECT (SELECT array_agg(id) FROM recorded), (SELECT count(*) FROM pending),"
    " (SELECT count(*) FROM failed), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, (SELECT beyond FROM beyond)"
    " ORDER BY next_attempt_at, id"
)


#: The ``v`` CTE's columns after the id, in the order of their parameters ($2, then
#: $16 to $23): what :func:`outcome_columns` makes from each outcome's values.
OUTCOME_COLUMNS = ("token", "status", "attempt", "next_at", "code", "error", "now",
                   "started", "latency")
#: How each column's values are written: quoted text, or numbers.
_TEXT_COLUMNS = frozenset({"token", "status", "error"})


#: A JSON array of strings, numbers and nulls is also a PostgreSQL array literal, once
#: its brackets are braces, if nothing in it is escaped (a JSON escape is not an array
#: literal's: ``\\n`` there is the letter n) and no number was written as ``null``
#: (msgspec writes infinities so). JSON's ``null`` is NULL there (case-insensitive).
_json = msgspec.json.Encoder().encode


def text_array(values: Sequence[str | None]) -> str:
    """A PostgreSQL array literal of ``values``, every element quoted (its backslashes and
    double quotes escaped), so any text survives; None is NULL."""
    encoded = _json(values)
    if b"\\" not in encoded:
        return "{" + encoded[1:-1].decode() + "}"
    return "{" + ",".join("NULL" if v is None else
                          '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
                          for v in values) + "}"


def number_array(values: Sequence[float | int | None]) -> str:
    """A PostgreSQL array literal of numbers, each as the shortest text that reads back as
    the same number (PostgreSQL's ``float8in`` reads it so); None is NULL."""
    encoded = _json(values)
    if encoded.count(b"null") == values.count(None):
        return "{" + encoded[1:-1].decode() + "}"
    return "{" + ",".join("NULL" if v is None else repr(v) for v in values) + "}"


def outcome_columns(rows: Sequence[tuple[Any, ...]]) -> tuple[str, ...]:
    """The outcomes' values (tuples in :data:`OUTCOME_COLUMNS` order) as one array literal
    per column. Text parameters cast to arrays by the server, not arrays: asyncpg tests
    every element of an array parameter against ``collections.abc`` classes in Python
    (~15 tests per outcome, a tenth of the worker's CPU per delivery in a drain,
    docs/performance.md, twenty-eighth pass), and the JSON document that replaced them
    cost the server a parse to check it, another to read it and a hash table per
    outcome, about a tenth of its work per delivery (fiftieth pass)."""
    if not rows:
        return tuple("{}" for _ in OUTCOME_COLUMNS)
    return tuple(text_array(values) if name in _TEXT_COLUMNS else number_array(values)
                 for name, values in zip(OUTCOME_COLUMNS, zip(*rows, strict=True),
                                         strict=True))


def columns(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    return [[r[i] for r in rows] for i in range(width)] if rows else [[] for _ in range(width)]


async def pg_cycle(db: PostgresDatabase, outcome_ids: Sequence[str],
                   outcomes: Sequence[str], claim: tuple[Any, ...] | None
                   ) -> tuple[set[str], list[tuple[float, DueDelivery]], int, int, bool]:
    """Run one cycle. ``outcome_ids``: the outcomes' delivery ids; ``outcomes``: their
    other values, :func:`outcome_columns`. ``claim``: (now, read, full endpoints, room
    endpoints, room values, default room, limit, token, lease_until, max_attempts, rows
    read per subscription, rows walked per status), or None. Returns (recorded ids,
    picked (next attempt time, delivery) oldest first, pending rows read, failed rows
    read, whether rows were read by subscription)."""
    if claim is None:
        # LIMIT 0 reads nothing; the other values are never used.
        claim = (0.0, 0, [], [], [], 0, 0, "", 0.0, 0, 0, 0)
    rows = await db.fetch_pinned(CYCLE_SQL, outcome_ids, outcomes[0], *claim, INTERRUPTED,
                                 *outcomes[1:])
    last = rows[-1]  # the cycle's own row: a picked row's next_attempt_at is never NULL
    assert last[3] is None
    recorded = set(last[0] or ())
    # By position (the final SELECT: recorded, pending, failed, then _COLUMNS in order):
    # sixteen lookups by name per delivery cost more than building the delivery.
    picked = [(float(r[11]), DueDelivery(
        r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[12], r[13], r[14], r[15], r[16],
        r[17].encode("utf-8"), r[18])) for r in rows[:-1]]
    return recorded, picked, int(last[1]), int(last[2]), bool(last[-1])
