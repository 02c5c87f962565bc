"""Hostile input at the API's edge: clear 400s, nothing stored, never a 500."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from monitor.api.jsonbody import MAX_DEPTH, nesting_depth
from tests.webhook_support import api_client, make_config, new_key, receiver, subscribe

DEEP = 5000


def _deep_bodies() -> list[bytes]:
    arrays = b"[" * DEEP + b"]" * DEEP
    objects = b'{"a":' * DEEP + b"1" + b"}" * DEEP
    inside = (b'{"webhookUrl": "https://example.com", "eventTypes": ["DEPEG_TIER_CHANGE"],'
              b' "filters": ' + b"[" * DEEP + b"]" * DEEP + b"}")
    return [arrays, objects, inside]


async def test_deeply_nested_bodies_are_400_not_500(tmp_path: Path) -> None:
    config = make_config(f"sqlite:///{tmp_path / 'store.db'}")
    assert max(len(b) for b in _deep_bodies()) < config.api.max_body_bytes  # under the cap
    async with api_client(config) as (client, db), receiver() as rec:
        key, _ = await new_key(db)
        headers = {"x-api-key": key, "content-type": "application/json"}
        sub = await subscribe(client, key, rec.url)
        for body in _deep_bodies():
            for method, path in (("POST", "/webhooks/subscriptions"),
                                 ("PATCH", f"/webhooks/subscriptions/{sub['id']}")):
                resp = await client.request(method, path, data=body, headers=headers)
                assert resp.status == 400, (method, await resp.text())
                error = await resp.json()
                assert error["field"] == "body" and "nested deeper" in error["error"]
        cursor = base64.urlsafe_b64encode(b"[" * 3000 + b"]" * 3000).decode().rstrip("=")
        for path in ("/rwa", "/vaults"):
            resp = await client.get(path, params={"cursor": cursor}, headers=headers)
            assert resp.status == 400, (path, await resp.text())
            assert (await resp.json())["parameter"] == "cursor"
        listed = await client.get("/webhooks/subscriptions", headers=headers)
        assert len((await listed.json())["subscriptions"]) == 1  # nothing new stored


def test_nesting_scan_ignores_brackets_inside_strings() -> None:
    assert nesting_depth(b'{"a": "[[[[{{{{\\"[[["}') == 1
    assert nesting_depth(b'[[1], {"b": [2]}]') == 3
    assert nesting_depth(b"[" * (MAX_DEPTH + 5), MAX_DEPTH) == MAX_DEPTH + 1


@pytest.mark.parametrize("tail", ["\r\nX-Injected: 1", "\n", "\x00", " ", "\t", "%0D%0A ",
                                  "\x7f"])
async def test_webhook_url_with_control_characters_or_spaces_is_refused(
        tmp_path: Path, tail: str) -> None:
    config = make_config(f"sqlite:///{tmp_path / 'store.db'}")
    async with api_client(config) as (client, db), receiver() as rec:
        key, _ = await new_key(db)
        headers = {"x-api-key": key}
        url = rec.url + tail
        resp = await client.post("/webhooks/subscriptions", headers=headers,
                                 json={"webhookUrl": url, "eventTypes": ["DEPEG_TIER_CHANGE"]})
        assert resp.status == 400, await resp.text()
        error = await resp.json()
        assert error["field"] == "webhookUrl"
        assert "spaces or control characters" in error["error"]
        sub = await subscribe(client, key, rec.url)
        resp = await client.patch(f"/webhooks/subscriptions/{sub['id']}", headers=headers,
                                  json={"webhookUrl": url})
        assert resp.status == 400 and (await resp.json())["field"] == "webhookUrl"
        listed = await (await client.get("/webhooks/subscriptions", headers=headers)).json()
        assert [s["webhook_url"] for s in listed["subscriptions"]] == [rec.url]
