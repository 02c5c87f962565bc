"""Webhook storage: API keys, subscriptions and the compute-unit ledger.

Every subscription query takes the caller's ``api_key_id``: a row of another key is
simply not found, which the API turns into 404 (tenant isolation lives in the SQL, not in
a check a handler could forget). Events, deliveries and attempts are in
:mod:`monitor.storage.deliveries`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import msgspec

from ..webhooks.apikeys import display_prefix, hash_api_key
from ..webhooks.filters import Filters, decode_filters, encode_filters
from .db import Database, Executor, Row
from .webhooks_schema import migrate_webhooks

__all__ = ["ApiKey", "Subscription", "WebhookStore", "charge", "migrate_webhooks"]


@dataclass(frozen=True)
class ApiKey:
    id: str
    name: str
    prefix: str
    created_at: float
    revoked_at: float | None


@dataclass(frozen=True)
class Subscription:
    id: str
    api_key_id: str
    webhook_url: str
    endpoint: str
    event_types: list[str]
    filters: Filters
    secret_sealed: str
    previous_secret_sealed: str | None
    rotated_at: float | None
    is_active: bool
    created_at: float
    updated_at: float


def _subscription(row: Row) -> Subscription:
    return Subscription(
        id=row["id"], api_key_id=row["api_key_id"], webhook_url=row["webhook_url"],
        endpoint=row["endpoint"],
        event_types=msgspec.json.decode(row["event_types"], type=list[str]),
        filters=decode_filters(row["filters"]), secret_sealed=row["secret_sealed"],
        previous_secret_sealed=row["previous_secret_sealed"], rotated_at=row["rotated_at"],
        is_active=bool(row["is_active"]), created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


_SUB_COLUMNS = ("id, api_key_id, webhook_url, endpoint, event_types, filters, secret_sealed,"
                " previous_secret_sealed, rotated_at, is_active, created_at, updated_at")


async def charge(ex: Executor, api_key_id: str, kind: str, ref: str, now: float,
                 units: int = 1) -> None:
    """One ledger line; ``(kind, ref)`` is unique, so charging a delivery twice is a no-op."""
    await ex.execute(
        "INSERT INTO cu_ledger (id, api_key_id, kind, ref, units, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (kind, ref) DO NOTHING",
        str(uuid.uuid4()), api_key_id, kind, ref, units, float(now),
    )


class WebhookStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- API keys ---------------------------------------------------------------------
    async def create_api_key(self, name: str, key: str, now: float) -> ApiKey:
        key_id = str(uuid.uuid4())
        await self.db.execute(
            "INSERT INTO api_keys (id, name, key_hash, prefix, created_at)"
            " VALUES ($1, $2, $3, $4, $5)",
            key_id, name, hash_api_key(key), display_prefix(key), float(now),
        )
        return ApiKey(key_id, name, display_prefix(key), now, None)

    async def list_api_keys(self) -> list[ApiKey]:
        rows = await self.db.fetch(
            "SELECT id, name, prefix, created_at, revoked_at FROM api_keys ORDER BY created_at")
        return [ApiKey(**r) for r in rows]

    async def revoke_api_key(self, id_or_prefix: str, now: float) -> int:
        """Revoke by id or display prefix; returns how many keys were revoked."""
        rows = await self.db.fetch(
            "SELECT id FROM api_keys WHERE (id = $1 OR prefix = $1) AND revoked_at IS NULL",
            id_or_prefix,
        )
        for row in rows:
            await self.db.execute(
                "UPDATE api_keys SET revoked_at = $2 WHERE id = $1", row["id"], float(now))
        return len(rows)

    async def authenticate(self, key: str) -> str | None:
        """The key's id when the key exists and is not revoked."""
        return await self.authenticate_hash(hash_api_key(key))

    async def authenticate_hash(self, key_hash: str) -> str | None:
        """As :meth:`authenticate`, for a key already hashed (the API's key cache)."""
        value = await self.db.fetchval(
            "SELECT id FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL", key_hash)
        return str(value) if value is not None else None

    # -- subscriptions ----------------------------------------------------------------
    async def create_subscription(
        self, *, sub_id: str, api_key_id: str, webhook_url: str, endpoint: str,
        event_types: list[str], filters: Filters, secret_sealed: str, now: float,
    ) -> Subscription:
        await self.db.execute(
            f"INSERT INTO webhook_subscriptions ({_SUB_COLUMNS})"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, NULL, 1, $8, $8)",
            sub_id, api_key_id, webhook_url, endpoint,
            msgspec.json.encode(event_types).decode(), encode_filters(filters),
            secret_sealed, float(now),
        )
        found = await self.get_subscription(api_key_id, sub_id)
        assert found is not None
        return found

    async def get_subscription(self, api_key_id: str, sub_id: str) -> Subscription | None:
        row = await self.db.fetchrow(
            f"SELECT {_SUB_COLUMNS} FROM webhook_subscriptions"
            " WHERE id = $1 AND api_key_id = $2 AND deleted_at IS NULL",
            sub_id, api_key_id,
        )
        return _subscription(row) if row else None

    async def list_subscriptions(self, api_key_id: str) -> list[Subscription]:
        rows = await self.db.fetch(
            f"SELECT {_SUB_COLUMNS} FROM webhook_subscriptions"
            " WHERE api_key_id = $1 AND deleted_at IS NULL ORDER BY created_at, id",
            api_key_id,
        )
        return [_subscription(r) for r in rows]

    async def active_subscriptions(self) -> list[Subscription]:
        """Every key's active subscriptions (the delivery worker matches events on them)."""
        rows = await self.db.fetch(
            "SELECT s.id, s.api_key_id, s.webhook_url, s.endpoint, s.event_types, s.filters,"
            " s.secret_sealed, s.previous_secret_sealed, s.rotated_at, s.is_active,"
            " s.created_at, s.updated_at FROM webhook_subscriptions s"
            " JOIN api_keys k ON k.id = s.api_key_id"
            " WHERE s.is_active = 1 AND s.deleted_at IS NULL AND k.revoked_at IS NULL"
        )
        return [_subscription(r) for r in rows]

    async def update_subscription(self, api_key_id: str, sub_id: str, changes: dict[str, Any],
                                  now: float) -> Subscription | None:
        """Apply validated ``changes`` (column -> value) to the caller's subscription."""
        columns = {"webhook_url", "endpoint", "event_types", "filters", "is_active"}
        values: list[Any] = []
        sets: list[str] = []
        for column, value in changes.items():
            if column not in columns:
                raise ValueError(f"not an updatable column: {column}")
            if column == "event_types":
                value = msgspec.json.encode(value).decode()
            elif column == "filters":
                value = encode_filters(value)
            elif column == "is_active":
                value = 1 if value else 0
            values.append(value)
            sets.append(f"{column} = ${len(values) + 3}")
        async with self.db.transaction() as tx:
            await tx.execute(
                "UPDATE webhook_subscriptions SET updated_at = $3"
                + "".join(", " + s for s in sets)
                + " WHERE id = $1 AND api_key_id = $2 AND deleted_at IS NULL",
                sub_id, api_key_id, float(now), *values,
            )
        return await self.get_subscription(api_key_id, sub_id)

    async def rotate_secret(self, api_key_id: str, sub_id: str, new_sealed: str,
                            previous_sealed: str, now: float) -> Subscription | None:
        await self.db.execute(
            "UPDATE webhook_subscriptions SET secret_sealed = $3, previous_secret_sealed = $4,"
            " rotated_at = $5, updated_at = $5"
            " WHERE id = $1 AND api_key_id = $2 AND deleted_at IS NULL",
            sub_id, api_key_id, new_sealed, previous_sealed, float(now),
        )
        return await self.get_subscription(api_key_id, sub_id)

    async def delete_subscription(self, api_key_id: str, sub_id: str, now: float) -> bool:
        """Soft delete (history stays listable); its unfinished deliveries are cancelled."""
        async with self.db.transaction() as tx:
            found = await tx.fetchval(
                "SELECT id FROM webhook_subscriptions"
                " WHERE id = $1 AND api_key_id = $2 AND deleted_at IS NULL", sub_id, api_key_id)
            if found is None:
                return False
            await tx.execute(
                "UPDATE webhook_subscriptions SET deleted_at = $2, is_active = 0, updated_at = $2"
                " WHERE id = $1", sub_id, float(now))
            # Through the (partial) due index: a pending or failed delivery always has its
            # next attempt time, and no index leads with subscription_id (one would cost
            # an entry per outcome, whose UPDATE is never a HOT update).
            await tx.execute(
                "UPDATE webhook_deliveries SET status = 'cancelled', next_attempt_at = NULL,"
                " last_error = 'subscription deleted', updated_at = $2"
                " WHERE subscription_id = $1 AND status IN ('pending', 'failed')"
                " AND next_attempt_at IS NOT NULL",
                sub_id, float(now))
        return True

    # -- compute units ----------------------------------------------------------------
    async def charge(self, api_key_id: str, kind: str, ref: str, now: float) -> None:
        await charge(self.db, api_key_id, kind, ref, now)

    async def units_used(self, api_key_id: str, kind: str | None = None) -> int:
        if kind is None:
            value = await self.db.fetchval(
                "SELECT COALESCE(SUM(units), 0) FROM cu_ledger WHERE api_key_id = $1",
                api_key_id)
        else:
            value = await self.db.fetchval(
                "SELECT COALESCE(SUM(units), 0) FROM cu_ledger"
                " WHERE api_key_id = $1 AND kind = $2", api_key_id, kind)
        return int(value or 0)
