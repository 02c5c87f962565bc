"""Batched attempt bookkeeping for the delivery worker: one transaction per batch.

Same rules as :meth:`DeliveryStore.begin_attempt` and :meth:`DeliveryStore.record_attempt`
(count an attempt before its request goes out; record an outcome only while the claim
is held and the delivery is not already a success), applied to many deliveries at once.
Per-delivery transactions were the worker's ceiling: two commits and four statements per
send, each a thread hop on SQLite and a round trip on PostgreSQL. A batch costs a fixed
handful of statements, whatever its size.

Which rows are still held is read inside the write transaction (SQLite's ``BEGIN
IMMEDIATE`` excludes other writers; PostgreSQL locks the rows ``FOR UPDATE``), so the
answer cannot change before the writes that depend on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .db import Database, Executor
from .deliveries import INTERRUPTED, DueDelivery


@dataclass(frozen=True)
class Outcome:
    """One finished send, as :meth:`DeliveryStore.record_attempt` takes it."""

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


async def _held(db: Database, tx: Executor, pairs: Sequence[tuple[str, str]]
                ) -> dict[str, int]:
    """``{delivery id: attempts}`` of those still claimed with their token and not a
    success."""
    ids = sorted({d for d, _ in pairs})
    marks = ", ".join(f"${i + 1}" for i in range(len(ids)))
    lock = " FOR UPDATE" if db.dialect == "postgresql" else ""
    rows = await tx.fetch(
        "SELECT id, lease_token, status, attempts FROM webhook_deliveries"
        f" WHERE id IN ({marks}){lock}", *ids)
    tokens = dict(pairs)
    return {r["id"]: int(r["attempts"]) for r in rows
            if r["lease_token"] == tokens[r["id"]] and r["status"] != "success"}


_CLAIMABLE = (
    "SELECT d.id, d.status, d.lease_until, d.attempts, d.next_attempt_at, s.webhook_url,"
    " s.secret_sealed, s.previous_secret_sealed, s.rotated_at"
    " FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id"
    " WHERE d.id IN ({marks}) AND s.is_active = 1 AND s.deleted_at IS NULL"
    " AND d.api_key_id IN (SELECT id FROM api_keys WHERE revoked_at IS NULL){lock}"
)


def _unchanged(row: dict[str, Any], d: DueDelivery, now: float) -> bool:
    """Still due, unclaimed, and exactly as the worker read it (attempts, target and
    secrets): a delivery read a moment ago is claimed only if nothing about it moved."""
    return (row["status"] in ("pending", "failed")
            and (row["lease_until"] is None or row["lease_until"] < now)
            and row["next_attempt_at"] is not None and row["next_attempt_at"] <= now
            and int(row["attempts"]) == d.attempts
            and (row["webhook_url"], row["secret_sealed"], row["previous_secret_sealed"],
                 row["rotated_at"]) == (d.webhook_url, d.secret_sealed,
                                        d.previous_secret_sealed, d.rotated_at))


async def claim_and_begin(db: Database, candidates: Sequence[DueDelivery], token: str,
                          now: float, lease_until: float, max_attempts: int
                          ) -> tuple[dict[str, int], list[DueDelivery]]:
    """Claim the candidates that are still due and unchanged and count one attempt for
    each, in one transaction, before any is sent. Returns ``({id: attempt number}, the
    claimed deliveries whose attempts are used up)`` — those must be given up, not sent.

    The same checks as :meth:`DeliveryStore.due` plus :meth:`DeliveryStore.claim_many`,
    made at claim time, so candidates may come from a read-ahead buffer."""
    if not candidates:
        return {}, []
    now, lease_until = float(now), float(lease_until)
    by_id = {d.id: d for d in candidates}
    ids = sorted(by_id)
    marks = ", ".join(f"${i + 1}" for i in range(len(ids)))
    lock = " FOR UPDATE OF d" if db.dialect == "postgresql" else ""
    async with db.transaction() as tx:
        rows = await tx.fetch(_CLAIMABLE.format(marks=marks, lock=lock), *ids)
        claimable = [by_id[r["id"]] for r in rows if _unchanged(r, by_id[r["id"]], now)]
        if not claimable:
            return {}, []
        exhausted = [d for d in claimable if d.attempts >= max_attempts]
        numbers = {d.id: d.attempts + 1 for d in claimable if d.attempts < max_attempts}
        if exhausted:
            await tx.executemany(
                "UPDATE webhook_deliveries SET lease_token = $2, lease_until = $3"
                " WHERE id = $1", [(d.id, token, lease_until) for d in exhausted])
        if numbers:
            await tx.executemany(
                "UPDATE webhook_deliveries SET lease_token = $2, lease_until = $3,"
                " attempts = $4, updated_at = $5 WHERE id = $1",
                [(d, token, lease_until, n, now) for d, n in numbers.items()])
            await tx.executemany(
                "INSERT INTO webhook_attempts (delivery_id, attempt, manual, started_at,"
                " status_code, latency_ms, error) VALUES ($1, $2, 0, $3, NULL, 0, $4)",
                [(d, n, now, INTERRUPTED) for d, n in numbers.items()])
    return numbers, exhausted


async def record_outcomes(db: Database, outcomes: Sequence[Outcome]) -> set[str]:
    """Store each outcome and its delivery's new state; returns the ids recorded (an
    outcome whose claim was lost, or whose delivery is already a success, is not)."""
    if not outcomes:
        return set()
    async with db.transaction() as tx:
        held = await _held(db, tx, [(o.delivery.id, o.token) for o in outcomes])
        mine = [o for o in outcomes if o.delivery.id in held]
        if not mine:
            return set()
        updates: list[tuple[Any, ...]] = []
        history: list[tuple[Any, ...]] = []
        for o in mine:
            completed = (float(o.now) if o.new_status in ("success", "max_retries_exceeded")
                         else None)
            updates.append((
                o.delivery.id, o.token, o.new_status, o.attempt,
                None if o.next_attempt_at is None else float(o.next_attempt_at),
                o.status_code, o.error, float(o.now), completed))
            history.append((o.delivery.id, o.attempt, float(o.started_at), o.status_code,
                            float(o.latency_ms), o.error))
        await tx.executemany(
            "UPDATE webhook_deliveries SET status = $3, attempts = $4, next_attempt_at = $5,"
            " last_status_code = $6, last_error = $7, updated_at = $8,"
            " completed_at = COALESCE($9, completed_at), lease_token = NULL,"
            " lease_until = NULL WHERE id = $1 AND lease_token = $2", updates)
        await tx.executemany(
            "INSERT INTO webhook_attempts (delivery_id, attempt, manual, started_at,"
            " status_code, latency_ms, error) VALUES ($1, $2, 0, $3, $4, $5, $6)"
            " ON CONFLICT (delivery_id, attempt) DO UPDATE SET"
            " status_code = excluded.status_code, latency_ms = excluded.latency_ms,"
            " error = excluded.error", history)
    return {o.delivery.id for o in mine}
