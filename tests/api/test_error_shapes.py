"""The two 400 detail families, as served and as published: the spec fixes error bodies
only for E8's pins (tested in test_v3_api.py), so /rwa and /vaults keep naming the query
``parameter`` and the webhook routes the ``field`` with a ``reason`` (clients read them);
the OpenAPI document's one ``Error`` schema declares both (the webhook module's own
``Error`` used to replace the shared one, so ``parameter`` was undocumented)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from monitor.api.openapi import build_document
from tests.webhook_support import api_client, make_config, new_key


def _error_schema() -> dict[str, Any]:
    schema: dict[str, Any] = build_document()["components"]["schemas"]["Error"]
    return schema


async def test_each_family_answers_its_documented_details(tmp_path: Path) -> None:
    schema = _error_schema()
    declared = set(schema["properties"])
    async with api_client(make_config(f"sqlite:///{tmp_path / 'store.db'}")) as (client, db):
        key, _ = await new_key(db)
        headers = {"x-api-key": key}
        bodies = {}
        for name, method, path, body in [
            ("rwa", "GET", "/rwa?tier=bogus", None),
            ("vaults", "GET", "/vaults?pageSize=x", None),
            ("webhooks", "POST", "/webhooks/subscriptions",
             {"webhookUrl": 5, "eventTypes": ["DEPEG_TIER_CHANGE"]}),
        ]:
            resp = await client.request(method, path, headers=headers, json=body)
            assert resp.status == 400, (name, await resp.text())
            bodies[name] = await resp.json()
    for name, body in bodies.items():
        assert not list(Draft202012Validator(schema).iter_errors(body)), name
        assert set(body) <= declared, (name, set(body) - declared)
    assert {"error", "parameter"} <= set(bodies["rwa"]) and bodies["rwa"]["parameter"] == "tier"
    assert bodies["vaults"]["parameter"] == "pageSize"
    assert bodies["webhooks"]["field"] == "webhookUrl" and bodies["webhooks"]["reason"]
