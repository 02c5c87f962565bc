"""The PostgreSQL cycle's outcomes, written as array literals the server reads back.

:func:`~monitor.storage.delivery_cycle_pg.outcome_columns` turns each outcome column into
one text parameter that the statement casts to an array. Checked against the values put
in (read back by a real server, not by our own parser), against the statement's own
column list, and end to end: the same outcomes written by the SQLite cycle and by the
PostgreSQL cycle leave the same delivery and history rows.
"""

from __future__ import annotations

import random
import re
import struct
from pathlib import Path
from typing import Any

import asyncpg

from monitor.config import DeliveryConfig
from monitor.storage import Database, connect
from monitor.storage.deliveries import DeliveryStore
from monitor.storage.delivery_batches import Outcome, _outcome_records, run_cycle
from monitor.storage.delivery_cycle_pg import (
    CYCLE_SQL,
    OUTCOME_COLUMNS,
    number_array,
    outcome_columns,
    text_array,
)
from monitor.storage.due_read import ClaimRequest
from monitor.webhooks.secrets import SecretBox
from tests.webhook_support import ENCRYPTION_KEY, queue_for_new_subscription

#: Text an array literal could get wrong: its own syntax, quoting, escapes, blanks,
#: the word NULL, non-ASCII, a long error message.
TEXTS = ["", "NULL", "null", " lead", "trail ", '"', "\\", '\\"', "{", "}", ",", "a,b",
         '{"a": [1, 2]}', 'HTTP 500 "x"\n\u2603', "\t\r\n", "\U0001f600", "x" * 5000,
         "connection reset by peer", None]
FLOATS = [0.0, -0.0, 1.0, -1.5, 5e-324, 1e-300, 1.7976931348623157e308, 0.1, 1 / 3,
          1764668400.1234567, 2.5e-7, 123456789.0, float("inf"), float("-inf"), None]
INTS = [0, 1, -1, 200, 599, 2**31 - 1, -(2**31), None]


def _random_floats(n: int) -> list[float]:
    rng = random.Random(15)
    out: list[float] = []
    while len(out) < n:
        x = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if x == x:  # not NaN: never a time, a latency or a delay
            out.append(x)
    return out


def _bits(x: float | None) -> bytes | None:
    return None if x is None else struct.pack("<d", x)


async def test_array_literals_read_back_as_the_values(pg_url: str) -> None:
    # Each list twice: as it is, and without what sends it past the one-encode path
    # (an escape in a text, an infinity among the numbers).
    finite = [x for x in FLOATS if x is None or abs(x) != float("inf")]
    floats = [FLOATS + _random_floats(2000), finite + _random_floats(2000)]
    plain = [t for t in TEXTS if t is None or not any(c in t for c in '"\\\t\r\n')]
    texts = [TEXTS, plain, []]
    conn = await asyncpg.connect(pg_url)
    try:
        async def back(literal: str, kind: str) -> list[Any]:
            rows = await conn.fetch(f"SELECT unnest($1::text::{kind}[])", literal)
            return [r[0] for r in rows]

        assert [await back(text_array(t), "text") for t in texts] == texts
        assert [[_bits(x) for x in await back(number_array(f), "float8")] for f in floats] \
            == [[_bits(x) for x in f] for f in floats]  # -0.0 included
        assert await back(number_array(INTS), "int") == INTS
    finally:
        await conn.close()
    assert len(plain) > 10 and len(finite) == len(FLOATS) - 2


def test_the_statement_reads_each_column_from_its_parameter() -> None:
    # pg_cycle passes (ids, first outcome column, 12 claim values, INTERRUPTED, the other
    # outcome columns): $1, $2, $3-$14, $15, $16 on.
    found = re.findall(r"unnest\(\$(\d+)(?:::text)?::\w+\[\]\) AS (\w+)", CYCLE_SQL)
    expected = [(1, "id"), (2, OUTCOME_COLUMNS[0])]
    expected += [(16 + i, name) for i, name in enumerate(OUTCOME_COLUMNS[1:])]
    assert [(int(n), name) for n, name in found] == expected


def test_outcome_records_follow_the_column_order() -> None:
    from monitor.storage.deliveries import DueDelivery

    d = DueDelivery("d1", "s1", "k1", "e1", "t", "pending", 0, 1.0, "http://x/", "http://x",
                    "sealed", None, None, b"{}", 1)
    outcomes = [Outcome(d, "tok", 1, 2.0, 200, 1.5, None, "success", None, 3.0),
                Outcome(d._replace(id="d2"), "tok", 2, 2, 500, 2, 'HTTP 500 "x"', "failed",
                        9, 4)]
    ids, columns = _outcome_records(outcomes)
    assert ids == ["d1", "d2"]
    rows = [("tok", "success", 1, None, 200, None, 3.0, 2.0, 1.5),
            ("tok", "failed", 2, 9.0, 500, 'HTTP 500 "x"', 4.0, 2.0, 2.0)]
    assert columns == outcome_columns(rows)
    assert _outcome_records([]) == ([], tuple("{}" for _ in OUTCOME_COLUMNS))


#: Per delivery (by its position in the intake's order): status, code, error, next
#: attempt's delay (None: finished).
SPEC: list[tuple[str, int | None, str | None, float | None]] = [
    ("success", 200, None, None),
    ("failed", 500, 'HTTP 500 "x"\n\u2603 {a,b} \\ NULL', 30.0),
    ("failed", None, "timeout", 0.1),
    ("max_retries_exceeded", 503, "", None),
    ("success", 204, None, None),
]


async def _write_outcomes(db: Database, box: SecretBox
                          ) -> tuple[list[Any], list[Any], list[Any], int]:
    """(delivery rows, the attempt history as the API reads it, the history the outcomes
    put in, history rows stored), deliveries in the intake's order."""
    await queue_for_new_subscription(db, box, "http://127.0.0.1:9/hook", len(SPEC) * 3)
    now = 1_800_000_000.25
    claimed = (await run_cycle(db, [], ClaimRequest(100, {}, 100, "T", now, now + 60, 5))
               ).claimed
    order = sorted(claimed, key=lambda c: c[0].seq)
    outcomes = []
    expected = []
    for i, (d, attempt) in enumerate(order):
        status, code, error, delay = SPEC[i % len(SPEC)]
        done = now + 1 + i / 7
        outcomes.append(Outcome(d, "T", attempt, now + i / 3, code, 10.5 + i / 9, error,
                                status, None if delay is None else done + delay, done))
        expected.append((attempt, 0, now + i / 3, code, 10.5 + i / 9, error))
    result = await run_cycle(db, outcomes, None)
    assert result.recorded == {d.id for d, _ in claimed}
    columns = ("status", "attempts", "next_attempt_at", "last_status_code", "last_error",
               "updated_at", "completed_at", "lease_token", "lease_until",
               "success_started_at", "success_latency_ms")
    deliveries = [tuple(r[c] for c in columns) for r in await db.fetch(
        f"SELECT {', '.join(columns)} FROM webhook_deliveries ORDER BY seq")]
    kept = ("attempt", "manual", "started_at", "status_code", "latency_ms", "error")
    found = await DeliveryStore(db).attempts([d.id for d, _ in order])
    history = [tuple(a[c] for c in kept) for d, _ in order for a in found[d.id]]
    stored = int(await db.fetchval("SELECT COUNT(*) FROM webhook_attempts"))
    return deliveries, history, expected, stored


async def test_both_cycles_write_the_same_rows(pg_url: str, tmp_path: Path) -> None:
    box = SecretBox.from_config(DeliveryConfig(secret_encryption_key=ENCRYPTION_KEY))
    written = []
    for url in (f"sqlite:///{tmp_path / 'store.db'}", pg_url):
        db = await connect(url)
        try:
            written.append(await _write_outcomes(db, box))
        finally:
            await db.close()
    (sqlite_rows, sqlite_history, expected, sqlite_stored), \
        (pg_rows, pg_history, _, pg_stored) = written
    assert len(sqlite_rows) == len(SPEC) * 3
    assert pg_rows == sqlite_rows
    # Every outcome reads back as its attempt, on both; a success from its delivery's row.
    assert sqlite_history == expected
    assert pg_history == expected
    successes = sum(1 for status, *_ in SPEC if status == "success") * 3
    assert sqlite_stored == pg_stored == len(SPEC) * 3 - successes
    assert {r[0] for r in pg_rows} == {"success", "failed", "max_retries_exceeded"}
