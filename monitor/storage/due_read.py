"""Which due deliveries a cycle claims: a bounded walk, a read by subscription, the pick.

The cycle (:mod:`~monitor.storage.delivery_batches`) claims the oldest due deliveries,
at most ``room`` per endpoint and ``limit`` in all. Two things make that read cheap
however the rows lie:

* a **bounded walk** of the ``(status, next_attempt_at)`` index: it skips rows no claim
  can take now (an endpoint without room, a paused subscription, a revoked key) until it
  has ``read`` rows, but walks at most ``WALK_SLACK`` times that many. Unbounded, a
  hanging endpoint's backlog, all due and the oldest, was walked by every cycle (linear:
  33 ms at 50,000 rows on SQLite, 67 ms on PostgreSQL; ``benchmarks/bench_due_read.py``);
* a **read by subscription**, only when a walk met its bound short of its rows and the
  claim is not filled: each active subscription's oldest claimable rows, through the
  ``(subscription_id, next_attempt_at)`` index, for the endpoints the walk did not fill.

Together they claim what one pass over every row would (:func:`pick` over all of them),
cycle after cycle as the worker runs them (``tests/webhooks/test_cycle_due_read.py``);
so does the read by subscription alone, which the worker asks for (``walk=False``) while
the endpoints that made its last walk meet its bound are still full: behind a hanging
endpoint, every walk would pass over the same backlog and find nothing to claim.
PostgreSQL does the same inside its one cycle statement
(:mod:`~monitor.storage.delivery_cycle_pg`), with the values below as parameters.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec

from .deliveries import RETRYABLE

_encode = msgspec.json.Encoder().encode


def json_text(values: Sequence[str]) -> str:
    """``values`` as a JSON array in text, for ``json_each``: msgspec takes ~0.2 µs for a
    short list where ``json.dumps`` takes ~2.4 µs (~11 µs for a cycle's ~40 ids). Text,
    not bytes: a BLOB is not JSON text to SQLite's JSON functions (an error before 3.45,
    binary JSONB since)."""
    return _encode(values).decode()


#: Claimable rows read per status and cycle, per delivery the claim may take. Rows of an
#: endpoint without room are passed over by the walk, not read, so 1 is enough: when an
#: endpoint's rows in the read exceed its room, the claim comes up short, the read was cut
#: at its limit, and the next cycle reads again at once (``CycleResult.more_due``). It was
#: 2: each read row is joined to its subscription and event and locked (a WAL record), so
#: a drain read and locked ~2.4 rows per delivery claimed. At 1 the PostgreSQL backends'
#: CPU per delivery fell by a tenth to a fifth, lower in each of 21 alternated drains
#: (docs/performance.md, forty-ninth pass); SQLite's and the isolation rows did not move.
READ_SLACK = 1
#: Rows the due read walks at most per status, in reads: it skips rows it cannot claim
#: (endpoints without room, paused subscriptions, revoked keys, rows a running claim
#: holds) until it has its rows, but only this many; past that, rows are read by
#: subscription (a hanging endpoint's backlog). A busy drain's walks, ~half rows of
#: endpoints briefly full, stay well within it. 8 with a read of 1 per delivery: the
#: bound in rows it was with a read of 2 and 4 reads.
WALK_SLACK = 8


@dataclass(frozen=True)
class ClaimRequest:
    """Claim up to ``limit`` due deliveries, at most ``room.get(endpoint, default_room)``
    per endpoint (rows of endpoints with no room are passed over)."""

    limit: int
    room: Mapping[str, int]
    default_room: int
    token: str
    now: float
    lease_until: float
    max_attempts: int
    #: False: read by subscription only, without the bounded walk. The dispatcher asks
    #: for this while the endpoints that made the last walk meet its bound are still
    #: full: that walk would pass over the same backlog again and then read by
    #: subscription anyway. The read by subscription alone claims what a full pass would
    #: (see :func:`per_subscription`), so this changes the read's cost, never its rows.
    walk: bool = True


class DueIds(NamedTuple):
    """What :func:`sqlite_due_ids` found."""

    #: Ids to claim, oldest first.
    picked: list[str]
    #: A walk returned all it asked for: more may be due right now.
    more_due: bool
    #: Rows were read by subscription: a walk met its bound short of the claim (or
    #: there was no walk).
    by_subscription: bool


def pick(rows: Sequence[Sequence[Any]], request: ClaimRequest) -> list[str]:
    """Ids to claim: oldest first, within the overall limit and each endpoint's room.
    ``rows`` are ``(id, next_attempt_at, endpoint)`` rows."""
    room = dict(request.room)
    picked: list[str] = []
    for row in sorted(rows, key=lambda r: float(r[1])):
        if len(picked) >= request.limit:
            break
        endpoint = row[2]
        left = room.get(endpoint, request.default_room)
        if left <= 0:
            continue
        room[endpoint] = left - 1
        picked.append(row[0])
    return picked


def read_rows(request: ClaimRequest) -> int:
    """Claimable rows a walk asks for, per status."""
    return request.limit * READ_SLACK


def walk_rows(request: ClaimRequest) -> int:
    """Rows a walk passes at most, per status (0: no walk, see ``ClaimRequest.walk``)."""
    return read_rows(request) * WALK_SLACK if request.walk else 0


def full_endpoints(request: ClaimRequest) -> list[str]:
    """Endpoints without room: their rows are passed over."""
    return sorted(e for e, n in request.room.items() if n <= 0)


def per_subscription(request: ClaimRequest) -> int:
    """Rows read per subscription when reading by subscription: enough for any endpoint's
    room, so the rows :func:`pick` would take from the whole table are among them."""
    return min(request.limit, max(request.default_room, *request.room.values(), 0))


def filled(rows: Sequence[Sequence[Any]], request: ClaimRequest) -> list[str]:
    """Endpoints a read by subscription can leave out: those without room, and those
    with at least their room's worth of claimable rows read already (rows beyond the
    walk are newer: :func:`pick` would take those it read first)."""
    count: dict[str, int] = {}
    for row in rows:
        count[row[2]] = count.get(row[2], 0) + 1
    done = {e for e, n in count.items() if n >= request.room.get(e, request.default_room)}
    return sorted(done.union(full_endpoints(request)))


#: The walk: the ``(status, next_attempt_at)`` index oldest first, stopping at ``?3``
#: claimable rows or after ``?5`` rows no send holds, whatever they are. SQLite runs a
#: ``NOT MATERIALIZED`` CTE read through a ``CROSS JOIN`` as a co-routine, so rows are
#: walked only as they are needed (a ``LIMIT`` subquery in ``FROM`` is materialized: the
#: whole bound, every cycle). The outer ``LIMIT`` takes them in the walk's order.
_SQLITE_DUE_IDS = (
    "WITH w AS NOT MATERIALIZED (SELECT id, next_attempt_at, subscription_id, api_key_id"
    " FROM webhook_deliveries WHERE status = ?1 AND next_attempt_at <= ?2"
    " AND (lease_until IS NULL OR lease_until < ?2) ORDER BY next_attempt_at LIMIT ?5)"
    " SELECT d.id, d.next_attempt_at, s.endpoint FROM w d"
    " CROSS JOIN webhook_subscriptions s ON s.id = d.subscription_id"
    " WHERE s.is_active = 1 AND s.deleted_at IS NULL"
    " AND d.api_key_id IN (SELECT id FROM api_keys WHERE revoked_at IS NULL)"
    " AND s.endpoint NOT IN (SELECT value FROM json_each(?4)) LIMIT ?3"
)
#: Whether the walk above met its bound: at least ``?3`` due rows no send holds.
_SQLITE_WALK_FULL = (
    "SELECT count(*) FROM (SELECT 1 FROM webhook_deliveries WHERE status = ?1"
    " AND next_attempt_at <= ?2 AND (lease_until IS NULL OR lease_until < ?2) LIMIT ?3)"
)
#: The rows beyond a walk that met its bound: each active subscription's oldest ``?2``
#: claimable rows (the ``(subscription_id, next_attempt_at)`` index), for the endpoints
#: the walks did not already fill (``?3``, :func:`filled`). A delivery's key is its
#: subscription's, so the key test is made once per subscription. Rows are joined back by
#: ``rowid``, not by the primary key: one B-tree descent per row where the ``id`` index
#: adds a second (1,600 rows: 3.2 -> 1.75 ms, docs/performance.md, 39th pass).
_SQLITE_DUE_BY_SUBSCRIPTION = (
    "SELECT d.id, d.next_attempt_at, s.endpoint FROM webhook_subscriptions s"
    " JOIN webhook_deliveries d ON d.rowid IN (SELECT x.rowid FROM webhook_deliveries x"
    " WHERE x.subscription_id = s.id AND x.next_attempt_at <= ?1"
    " AND x.status IN ('pending', 'failed') AND (x.lease_until IS NULL OR x.lease_until < ?1)"
    " ORDER BY x.next_attempt_at LIMIT ?2)"
    " WHERE s.is_active = 1 AND s.deleted_at IS NULL"
    " AND s.api_key_id IN (SELECT id FROM api_keys WHERE revoked_at IS NULL)"
    " AND s.endpoint NOT IN (SELECT value FROM json_each(?3))"
)


def sqlite_due_ids(conn: sqlite3.Connection, claim: ClaimRequest) -> DueIds:
    """The ids to claim, oldest first, whether more may be due right now (a walk returned
    all it asked for), and whether rows were read by subscription."""
    read, walk = read_rows(claim), walk_rows(claim)
    rows: list[Sequence[Any]] = []
    picked: list[str] = []
    more_due = False
    beyond = True  # no walk: read by subscription
    if walk:
        full = json_text(full_endpoints(claim))
        short: list[str] = []  # statuses whose walk returned fewer than it asked for
        for status in RETRYABLE:
            found = conn.execute(_SQLITE_DUE_IDS, (status, claim.now, read, full, walk)
                                 ).fetchall()
            rows += found
            if len(found) < read:
                short.append(status)
        picked = pick(rows, claim)
        more_due = len(short) < len(RETRYABLE)
        # Whether a short walk stopped at its bound is asked only when the claim is not
        # filled: only then would the rows beyond it be read.
        beyond = len(picked) < claim.limit and any(
            conn.execute(_SQLITE_WALK_FULL, (status, claim.now, walk)).fetchone()[0] >= walk
            for status in short)
    if beyond:
        seen = {row[0] for row in rows}
        rows += [row for row in conn.execute(_SQLITE_DUE_BY_SUBSCRIPTION, (
            claim.now, per_subscription(claim), json_text(filled(rows, claim)))).fetchall()
            if row[0] not in seen]
        picked = pick(rows, claim)
    return DueIds(picked, more_due, beyond)
