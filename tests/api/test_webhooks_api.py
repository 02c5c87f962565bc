"""The webhook HTTP API (E10-E15) on both databases, through real HTTP on loopback."""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any

import msgspec
import pytest

from monitor.api.webhooks import OPENAPI_PATHS, OPENAPI_SCHEMAS
from monitor.storage.webhooks import WebhookStore
from monitor.webhooks.signing import verify
from tests.webhook_support import (
    api_client,
    delivery_with_attempts,
    make_config,
    new_key,
    receiver,
    subscribe,
)


def h(key: str) -> dict[str, str]:
    return {"x-api-key": key}


async def test_every_webhook_route_requires_a_key(storage_url: str) -> None:
    # 27 refused requests in a row: more than the failed-auth burst of one address, which
    # would turn the last ones into 429s (that limiter is tested in test_rate_limit.py).
    config = make_config(storage_url)
    config = msgspec.structs.replace(
        config, api=msgspec.structs.replace(config.api, failed_auth_per_second=0))
    async with api_client(config) as (client, db):
        routes = [("POST", "/webhooks/subscriptions"), ("GET", "/webhooks/subscriptions"),
                  ("GET", "/webhooks/subscriptions/x"), ("PATCH", "/webhooks/subscriptions/x"),
                  ("DELETE", "/webhooks/subscriptions/x"),
                  ("POST", "/webhooks/subscriptions/x/test"),
                  ("POST", "/webhooks/subscriptions/x/rotate-secret"),
                  ("GET", "/webhooks/deliveries"), ("POST", "/webhooks/deliveries/x/retry")]
        key, _ = await new_key(db)
        await WebhookStore(db).revoke_api_key(key[:12], time.time())
        for method, path in routes:
            for headers in ({}, h("dpm_unknown"), h(key)):
                resp = await client.request(method, path, headers=headers)
                assert resp.status == 401, (method, path)
                assert resp.content_type == "application/json"
                assert "error" in await resp.json()
        # Probes and the OpenAPI document are not behind the key (404 here: no such route
        # in this module, but never 401).
        for path in ("/healthz", "/readyz", "/metrics", "/openapi.json"):
            assert (await client.get(path)).status != 401


async def test_create_returns_secret_once_and_charges(storage_url: str) -> None:
    async with api_client(make_config(storage_url)) as (client, db), receiver() as rec:
        key, key_id = await new_key(db)
        created = await subscribe(client, key, rec.url,
                                  {"tiers": ["warning", "critical"], "chains": ["eth"],
                                   "tokens": ["0xDAC17F958D2EE523A2206206994597C13D831EC7"],
                                   "minDeviationPct": 1.5})
        assert created["secret_key"].startswith("whsec_")
        assert created["is_active"] is True and created["event_types"] == ["DEPEG_TIER_CHANGE"]
        assert created["filters"]["tokens"] == ["0xdac17f958d2ee523a2206206994597c13d831ec7"]
        assert created["filters"]["minDeviationPct"] == 1.5
        got = await (await client.get(f"/webhooks/subscriptions/{created['id']}",
                                      headers=h(key))).json()
        assert "secret_key" not in got and got["webhook_url"] == rec.url
        listed = await (await client.get("/webhooks/subscriptions", headers=h(key))).json()
        assert [s["id"] for s in listed["subscriptions"]] == [created["id"]]
        assert all("secret_key" not in s for s in listed["subscriptions"])
        store = WebhookStore(db)
        assert await store.units_used(key_id, "E10") == 1
        assert await store.units_used(key_id, "E11") == 2


@pytest.mark.parametrize("body, field", [
    ({"eventTypes": ["DEPEG_TIER_CHANGE"]}, "webhookUrl"),
    ({"webhookUrl": "https://example.com"}, "eventTypes"),
    ({"webhookUrl": "https://example.com", "eventTypes": []}, "eventTypes"),
    ({"webhookUrl": "https://example.com", "eventTypes": ["TOKEN_LAUNCH_ANALYSIS"]},
     "eventTypes"),
    ({"webhookUrl": 5, "eventTypes": ["DEPEG_TIER_CHANGE"]}, "webhookUrl"),
    ({"webhookUrl": "https://10.0.0.1/x", "eventTypes": ["DEPEG_TIER_CHANGE"]}, "webhookUrl"),
    ({"webhookUrl": "https://example.com", "eventTypes": ["DEPEG_TIER_CHANGE"],
      "filters": {"tiers": ["bad"]}}, "filters.tiers"),
    ({"webhookUrl": "https://example.com", "eventTypes": ["DEPEG_TIER_CHANGE"],
      "filters": {"chains": ["solana"]}}, "filters.chains"),
    ({"webhookUrl": "https://example.com", "eventTypes": ["DEPEG_TIER_CHANGE"],
      "filters": {"tokens": ["0x12"]}}, "filters.tokens"),
    ({"webhookUrl": "https://example.com", "eventTypes": ["DEPEG_TIER_CHANGE"],
      "filters": {"minDeviationPct": "1"}}, "filters.minDeviationPct"),
    ({"webhookUrl": "https://example.com", "eventTypes": ["DEPEG_TIER_CHANGE"],
      "filters": {"minDeviation": 1}}, "filters.minDeviation"),
    ({"webhookUrl": "https://example.com", "eventTypes": ["DEPEG_TIER_CHANGE"],
      "filter": {}}, "filter"),
    ([], "body"),
])
async def test_validation_errors_name_the_field(storage_url: str, body: Any, field: str) -> None:
    config = make_config(storage_url, allow_loopback=False)
    async with api_client(config) as (client, db):
        key, _ = await new_key(db)
        resp = await client.post("/webhooks/subscriptions", json=body, headers=h(key))
        assert resp.status == 400
        data = await resp.json()
        assert data["field"] == field and data["error"]
        bad = await client.post("/webhooks/subscriptions", data=b"{nope", headers=h(key))
        assert bad.status == 400 and (await bad.json())["field"] == "body"


async def test_ssrf_refused_at_creation(storage_url: str) -> None:
    config = make_config(storage_url, allow_loopback=False)
    async with api_client(config) as (client, db):
        key, _ = await new_key(db)
        for url in ("http://example.com/", "https://127.0.0.1/", "https://[::1]/",
                    "https://10.0.0.1/", "https://169.254.169.254/",
                    "https://[::ffff:10.0.0.1]/", "https://localhost/"):
            resp = await client.post("/webhooks/subscriptions", headers=h(key),
                                     json={"webhookUrl": url,
                                           "eventTypes": ["DEPEG_TIER_CHANGE"]})
            assert resp.status == 400, url
            assert (await resp.json())["field"] == "webhookUrl"


async def test_patch_delete_and_test_endpoint(storage_url: str) -> None:
    async with api_client(make_config(storage_url)) as (client, db), receiver() as rec:
        key, _ = await new_key(db)
        sub = await subscribe(client, key, rec.url)
        path = f"/webhooks/subscriptions/{sub['id']}"
        resp = await client.patch(path, json={"isActive": False, "filters": {"tiers": ["ok"]}},
                                  headers=h(key))
        assert resp.status == 200
        patched = await resp.json()
        assert patched["is_active"] is False and patched["filters"] == {"tiers": ["ok"]}
        bad = await client.patch(path, json={"isActive": "no"}, headers=h(key))
        assert bad.status == 400 and (await bad.json())["field"] == "isActive"
        bad = await client.patch(path, json={"webhookUrl": "https://10.1.2.3/"}, headers=h(key))
        assert (await bad.json())["field"] == "webhookUrl"

        result = await (await client.post(path + "/test", headers=h(key))).json()
        assert result["delivered"] is True and result["status_code"] == 200
        (got,) = rec.received
        assert verify(got.body, got.headers, sub["secret_key"])
        assert got.headers["X-Event-Type"] == "DEPEG_TIER_CHANGE"
        assert got.headers["X-Event-ID"] == result["event_id"]

        assert (await client.delete(path, headers=h(key))).status == 204
        assert (await client.get(path, headers=h(key))).status == 404
        assert (await client.delete(path, headers=h(key))).status == 404


async def test_rotate_secret_sends_both_signatures(storage_url: str) -> None:
    now = [time.time()]
    async with api_client(make_config(storage_url), clock=lambda: now[0]) as (client, db), \
            receiver() as rec:
        key, _ = await new_key(db)
        sub = await subscribe(client, key, rec.url)
        path = f"/webhooks/subscriptions/{sub['id']}"
        rotated = await (await client.post(path + "/rotate-secret", headers=h(key))).json()
        new_secret = rotated["secret_key"]
        assert new_secret != sub["secret_key"] and "previous_secret_expires_at" in rotated
        await client.post(path + "/test", headers=h(key))
        now[0] += 24 * 3600 + 1
        await client.post(path + "/test", headers=h(key))
        during, after = rec.received
        assert during.headers["X-Webhook-Signature"] != during.headers[
            "X-Webhook-Previous-Signature"]
        assert verify(during.body, during.headers, new_secret)
        assert verify(during.body, during.headers, sub["secret_key"])
        assert "X-Webhook-Previous-Signature" not in after.headers
        assert verify(after.body, after.headers, new_secret)


async def _failed_delivery(db: Any, key_id: str, sub_id: str) -> str:
    """A delivery that has used up its attempts (as the worker would leave it)."""
    return await delivery_with_attempts(db, sub_id, attempts=1)


async def test_deliveries_list_and_manual_retry_rate_limit(storage_url: str) -> None:
    async with api_client(make_config(storage_url)) as (client, db), receiver([500]) as rec:
        key, key_id = await new_key(db)
        sub = await subscribe(client, key, rec.url)
        ids = [await _failed_delivery(db, key_id, sub["id"]) for _ in range(3)]
        page = await (await client.get("/webhooks/deliveries?pageSize=2&status="
                                       "max_retries_exceeded&eventType=DEPEG_TIER_CHANGE",
                                       headers=h(key))).json()
        assert page["total"] == 3 and len(page["deliveries"]) == 2 and page["hasMore"]
        page2 = await (await client.get("/webhooks/deliveries?pageSize=2&page=2",
                                        headers=h(key))).json()
        assert len(page2["deliveries"]) == 1 and not page2["hasMore"]
        listed = {d["id"] for d in page["deliveries"] + page2["deliveries"]}
        assert listed == set(ids)
        assert page["deliveries"][0]["attempt_history"][0]["status_code"] == 500
        for query, field in (("status=bogus", "status"), ("pageSize=501", "pageSize"),
                             ("page=0", "page"), ("eventType=X", "eventType")):
            bad = await client.get(f"/webhooks/deliveries?{query}", headers=h(key))
            assert bad.status == 400 and (await bad.json())["field"] == field
        empty = await (await client.get("/webhooks/deliveries?status=success",
                                        headers=h(key))).json()
        assert empty["total"] == 0

        first = await client.post(f"/webhooks/deliveries/{ids[0]}/retry", headers=h(key))
        assert first.status == 200
        body = await first.json()
        assert body["attempts"] == 2 and body["attempt_history"][1]["manual"] is True
        assert body["status"] == "max_retries_exceeded"
        assert len(rec.received) == 1
        second = await client.post(f"/webhooks/deliveries/{ids[0]}/retry", headers=h(key))
        assert second.status == 429
        assert 290 <= int(second.headers["Retry-After"]) <= 300
        assert "error" in await second.json()
        assert len(rec.received) == 1
        # another delivery has its own 5-minute slot, and a success ends retrying
        rec.script = [200]
        ok = await (await client.post(f"/webhooks/deliveries/{ids[1]}/retry",
                                      headers=h(key))).json()
        assert ok["status"] == "success"
        assert verify(rec.received[-1].body, rec.received[-1].headers, sub["secret_key"])
        assert await WebhookStore(db).units_used(key_id, "E15") == 3


async def test_tenant_isolation(storage_url: str) -> None:
    async with api_client(make_config(storage_url)) as (client, db), receiver() as rec:
        key_a, a_id = await new_key(db, "a")
        key_b, _ = await new_key(db, "b")
        sub = await subscribe(client, key_a, rec.url)
        delivery = await _failed_delivery(db, a_id, sub["id"])
        path = f"/webhooks/subscriptions/{sub['id']}"
        for method, url, body in (
            ("GET", path, None), ("PATCH", path, {"isActive": False}),
            ("DELETE", path, None), ("POST", path + "/test", None),
            ("POST", path + "/rotate-secret", None),
            ("POST", f"/webhooks/deliveries/{delivery}/retry", None),
        ):
            resp = await client.request(method, url, json=body, headers=h(key_b))
            assert resp.status == 404, (method, url)
        listed = await (await client.get("/webhooks/subscriptions", headers=h(key_b))).json()
        assert listed["subscriptions"] == []
        deliveries = await (await client.get("/webhooks/deliveries", headers=h(key_b))).json()
        assert deliveries["total"] == 0
        assert rec.received == []  # B's /test never reached A's endpoint
        # A still owns an unchanged, active subscription with its original secret
        got = await (await client.get(path, headers=h(key_a))).json()
        assert got["is_active"] is True and "secret_rotated_at" not in got
        assert (await client.post(path + "/test", headers=h(key_a))).status == 200
        raw = rec.received[0].body
        event = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])["event"]
        expected = hmac.new(sub["secret_key"].encode(), bytes(event), hashlib.sha256)
        assert rec.received[0].headers["X-Webhook-Signature"] == expected.hexdigest()


def test_openapi_fragments_are_well_formed() -> None:
    expected = {"/webhooks/subscriptions", "/webhooks/subscriptions/{id}",
                "/webhooks/subscriptions/{id}/test",
                "/webhooks/subscriptions/{id}/rotate-secret", "/webhooks/deliveries",
                "/webhooks/deliveries/{id}/retry"}
    assert set(OPENAPI_PATHS) == expected
    refs = {part.rsplit("/", 1)[-1] for part in _refs(OPENAPI_PATHS) | _refs(OPENAPI_SCHEMAS)}
    assert refs <= set(OPENAPI_SCHEMAS) | {"Error"}  # Error: the shared one (api/openapi.py)


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if "$ref" in node else set()
        for value in node.values():
            found |= _refs(value)
        return found
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node)) if node else set()
    return set()
