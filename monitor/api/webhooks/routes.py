"""Routes: webhook subscriptions and deliveries (spec E10-E15, plus a list of one's own).

Every handler is scoped by the authenticated key: another key's subscription or delivery
is "not found" (404), never "forbidden", so ids of other tenants cannot be probed. Every
call costs 1 CU (ledger kinds ``E10``..``E15``) whatever its 2xx/4xx outcome
(monitor/api/billing.py says which calls are charged).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from aiohttp import web

from ...logs import get_logger
from ...records import EVENT_TYPE, TierChangeData, TierChangeEvent, encode
from ...storage.deliveries import DeliveryStore
from ...storage.webhooks import Subscription, WebhookStore, migrate_webhooks
from ...timefmt import format_ts
from ...webhooks.dispatcher import DeliveryAttempts
from ...webhooks.secrets import SecretBox, new_secret
from ...webhooks.sender import Sender
from ...webhooks.urls import UnsafeUrl, check_url_resolving, origin
from ..billing import billed
from ..context import CLOCK, CONFIG, DB, api_key_id, json_response
from ..errors import ApiError
from . import requests as req
from .openapi import OPENAPI_PATHS, OPENAPI_SCHEMAS, OPENAPI_SECURITY_SCHEMES

__all__ = ["OPENAPI_PATHS", "OPENAPI_SCHEMAS", "OPENAPI_SECURITY_SCHEMES", "add_routes"]

log = get_logger(__name__)

ATTEMPTS = web.AppKey("webhooks_attempts", DeliveryAttempts)
_json = json_response


def _now(request: web.Request) -> float:
    return request.app[CLOCK]()


def subscription_json(sub: Subscription, secret: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": sub.id,
        "webhook_url": sub.webhook_url,
        "event_types": sub.event_types,
        "filters": msgspec.to_builtins(sub.filters),
        "is_active": sub.is_active,
        "created_at": format_ts(sub.created_at),
        "updated_at": format_ts(sub.updated_at),
    }
    if secret is not None:
        out["secret_key"] = secret
    if sub.rotated_at is not None:
        out["secret_rotated_at"] = format_ts(sub.rotated_at)
    return out


def _ts(value: float | None) -> str | None:
    return None if value is None else format_ts(value)


def delivery_json(row: dict[str, Any], attempts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": row["id"], "subscription_id": row["subscription_id"],
        "event_id": row["event_id"], "event_type": row["event_type"],
        "status": row["status"], "attempts": row["attempts"],
        "next_attempt_at": _ts(row["next_attempt_at"]),
        "last_status_code": row["last_status_code"], "last_error": row["last_error"],
        "last_manual_retry_at": _ts(row["last_manual_retry_at"]),
        "created_at": _ts(row["created_at"]), "updated_at": _ts(row["updated_at"]),
        "completed_at": _ts(row["completed_at"]),
        "attempt_history": [
            {"attempt": a["attempt"], "manual": bool(a["manual"]),
             "started_at": _ts(a["started_at"]), "status_code": a["status_code"],
             "latency_ms": round(a["latency_ms"], 3), "error": a["error"]}
            for a in attempts
        ],
    }


async def _checked_url(request: web.Request, url: str) -> str:
    try:
        await check_url_resolving(url, request.app[CONFIG].delivery.allow_loopback)
    except UnsafeUrl as exc:
        raise req.invalid("webhookUrl", str(exc)) from None
    return url


async def _own_subscription(request: web.Request) -> Subscription:
    sub = await WebhookStore(request.app[DB]).get_subscription(
        api_key_id(request), request.match_info["id"])
    if sub is None:
        raise ApiError(404, "subscription not found")
    return sub


@billed("E10")
async def create_subscription(request: web.Request) -> web.Response:
    body = req.create_request(await request.read())
    url = await _checked_url(request, body.webhook_url)
    sub_id = str(uuid.uuid4())
    secret = new_secret()
    box = request.app[ATTEMPTS].box
    now = _now(request)
    sub = await WebhookStore(request.app[DB]).create_subscription(
        sub_id=sub_id, api_key_id=api_key_id(request), webhook_url=url, endpoint=origin(url),
        event_types=body.event_types, filters=body.filters.normalized(),
        secret_sealed=box.seal(secret, sub_id), now=now)
    log.info("webhook.subscription_created", subscription_id=sub_id)
    return _json(subscription_json(sub, secret), status=201)


@billed("E11")
async def list_subscriptions(request: web.Request) -> web.Response:
    subs = await WebhookStore(request.app[DB]).list_subscriptions(api_key_id(request))
    return _json({"subscriptions": [subscription_json(s) for s in subs]})


@billed("E11")
async def get_subscription(request: web.Request) -> web.Response:
    return _json(subscription_json(await _own_subscription(request)))


@billed("E11")
async def patch_subscription(request: web.Request) -> web.Response:
    await _own_subscription(request)
    changes = req.patch_request(await request.read())
    if "webhook_url" in changes:
        changes["endpoint"] = origin(await _checked_url(request, changes["webhook_url"]))
    if "filters" in changes:
        changes["filters"] = changes["filters"].normalized()
    now = _now(request)
    sub = await WebhookStore(request.app[DB]).update_subscription(
        api_key_id(request), request.match_info["id"], changes, now)
    if sub is None:
        raise ApiError(404, "subscription not found")
    return _json(subscription_json(sub))


@billed("E11")
async def delete_subscription(request: web.Request) -> web.Response:
    deleted = await WebhookStore(request.app[DB]).delete_subscription(
        api_key_id(request), request.match_info["id"], _now(request))
    if not deleted:
        raise ApiError(404, "subscription not found")
    return web.Response(status=204)


def synthetic_event(now: float) -> TierChangeEvent:
    """E12's test event: clearly fake (symbol TEST, zero address), shaped like a real one."""
    return TierChangeEvent(
        event_type=EVENT_TYPE, event_id=str(uuid.uuid4()), timestamp=format_ts(now),
        data=TierChangeData(
            token_address="0x0000000000000000000000000000000000000000", chain="eth",
            symbol="TEST", old_tier="ok", new_tier="watch", risk_score=45.0,
            deviation_pct=-0.6, price_usd="0.994", peg_usd="1"))


@billed("E12")
async def test_subscription(request: web.Request) -> web.Response:
    sub = await _own_subscription(request)
    attempts = request.app[ATTEMPTS]
    now = _now(request)
    event = synthetic_event(now)
    secret, previous = attempts.secrets_for(sub.id, sub.secret_sealed,
                                            sub.previous_secret_sealed, sub.rotated_at, now)
    result = await attempts.sender.send(
        sub.webhook_url, encode(event), event_type=event.event_type, event_id=event.event_id,
        secret=secret, previous_secret=previous, delivered_at=now)
    return _json({"delivered": result.ok, "event_id": event.event_id,
                  "status_code": result.status_code,
                  "latency_ms": round(result.latency_ms, 3), "error": result.error})


@billed("E13")
async def rotate_secret(request: web.Request) -> web.Response:
    sub = await _own_subscription(request)
    box = request.app[ATTEMPTS].box
    now = _now(request)
    secret = new_secret()
    # The secret in use becomes the previous one (it keeps signing for 24 h).
    updated = await WebhookStore(request.app[DB]).rotate_secret(
        api_key_id(request), sub.id, box.seal(secret, sub.id), sub.secret_sealed, now)
    if updated is None:
        raise ApiError(404, "subscription not found")
    window = request.app[ATTEMPTS].config.previous_secret_seconds
    log.info("webhook.secret_rotated", subscription_id=sub.id)
    return _json(subscription_json(updated, secret)
                 | {"previous_secret_expires_at": format_ts(now + window)})


@billed("E14")
async def list_deliveries(request: web.Request) -> web.Response:
    q = req.delivery_query(request.query)
    store = DeliveryStore(request.app[DB])
    rows, total = await store.list_page(
        api_key_id(request), status=q.status, event_type=q.event_type,
        subscription_id=q.subscription_id, limit=q.page_size,
        offset=(q.page - 1) * q.page_size)
    attempts = await store.attempts([r["id"] for r in rows])
    return _json({
        "deliveries": [delivery_json(r, attempts[r["id"]]) for r in rows],
        "page": q.page, "pageSize": q.page_size, "total": total,
        "hasMore": q.page * q.page_size < total,
    })


@billed("E15")
async def retry_delivery(request: web.Request) -> web.Response:
    key_id = api_key_id(request)
    store = DeliveryStore(request.app[DB])
    attempts = request.app[ATTEMPTS]
    interval = attempts.config.manual_retry_interval_seconds
    row = await store.get(key_id, request.match_info["id"])
    if row is None:
        raise ApiError(404, "delivery not found")
    now = _now(request)
    last = row["last_manual_retry_at"]

    def too_soon(last_at: float) -> ApiError:
        wait = max(1, math.ceil(interval - (now - last_at)))
        return ApiError(429, "manual retry allowed once per delivery per 5 minutes",
                        headers={"Retry-After": str(wait)}, retry_after_seconds=wait)

    if last is not None and now - last < interval:
        raise too_soon(last)
    if row["status"] not in ("failed", "max_retries_exceeded"):
        raise ApiError(409, f"delivery is {row['status']}; only failed deliveries can be "
                            "re-sent", delivery_status=row["status"])
    if not await store.mark_manual_retry(key_id, row["id"], now, interval):
        raise too_soon(now)
    token = uuid.uuid4().hex
    if not await store.claim(row["id"], token, now, attempts.lease_until(now),
                             ("failed", "max_retries_exceeded")):
        raise ApiError(409, "delivery is being sent right now; try again later")
    due = await store.load(row["id"])
    if due is None:
        await store.release(row["id"], token)
        raise ApiError(404, "delivery not found")
    await attempts.attempt(due, token, manual=True)
    fresh = await store.get(key_id, row["id"])
    assert fresh is not None
    history = await store.attempts([row["id"]])
    return _json(delivery_json(fresh, history[row["id"]]))


async def _attempts_ctx(app: web.Application) -> AsyncIterator[None]:
    config = app[CONFIG]
    if config.delivery.allow_loopback:
        log.warning("webhook.allow_loopback_enabled",
                    message="DEVELOPMENT SETTING delivery.allow_loopback IS ON: http:// and "
                            "loopback webhook URLs are accepted. Never enable in production.")
    await migrate_webhooks(app[DB])
    sender = Sender(config.delivery)
    app[ATTEMPTS] = DeliveryAttempts(DeliveryStore(app[DB]), sender,
                                     SecretBox.from_config(config.delivery), config.delivery,
                                     clock=lambda: app[CLOCK]())
    yield
    await sender.close()


def add_routes(app: web.Application) -> None:
    app.cleanup_ctx.append(_attempts_ctx)
    base = "/webhooks/subscriptions"
    app.router.add_post(base, create_subscription)
    app.router.add_get(base, list_subscriptions)
    app.router.add_get(base + "/{id}", get_subscription)
    app.router.add_patch(base + "/{id}", patch_subscription)
    app.router.add_delete(base + "/{id}", delete_subscription)
    app.router.add_post(base + "/{id}/test", test_subscription)
    app.router.add_post(base + "/{id}/rotate-secret", rotate_secret)
    app.router.add_get("/webhooks/deliveries", list_deliveries)
    app.router.add_post("/webhooks/deliveries/{id}/retry", retry_delivery)
