"""E8 GET /v3/vaults/{address} on a live server: vaults rated by the real vault engine and
stored as the store writer stores them; the spec's V3 error rows; headers; 1 CU a call."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from consumers.vault_store import fold_facts, rating_row
from monitor.storage import Database
from monitor.storage.vaults import FactsUpdate, VaultStore
from monitor.vaults.config import VaultsConfig
from monitor.vaults.engine import VaultEngine
from monitor.vaults.facts import decode_facts
from monitor.vaults.records import encode_rating
from tests.webhook_support import api_client, make_config, new_key

T0 = "2026-06-01T00:00:00Z"
LOCKED = "0x" + "0a" * 20  # redemptions closed, EOA owner, unverified
CLEAN = "0x" + "0b" * 20  # everything observed and fine
V2 = [(5, "A+"), (12, "A"), (20, "A-"), (28, "B+"), (37, "B"), (46, "B-"), (56, "C+"),
      (66, "C"), (77, "C-"), (88, "D"), (100, "F")]
V1 = [(19, "A"), (34, "B"), (59, "C"), (74, "D"), (100, "F")]
BASE = {"ts": T0, "chain": "eth", "name": "V", "protocol": "lendA",
        "contract_type": "erc4626_vault", "underlying_symbol": "WETH",
        "underlying_address": "0xc02aaa39a083c0d2ce3d14b6a9ebbf45ba48be5b",
        "underlying_risk": "battle_tested", "tvl_usd": 5e7, "apy_pct": 4.0}
FACTS = [
    {**BASE, "vault": LOCKED, "redemption_open": False, "deposit_open": True,
     "owner_kind": "eoa", "timelock_seconds": 0, "source_verified": False, "audit_count": 0,
     "upgradeable": True, "event_count": 5000, "deployed_at": "2024-01-01T00:00:00Z"},
    {**BASE, "vault": CLEAN, "redemption_open": True, "deposit_open": True,
     "owner_kind": "timelock", "timelock_seconds": 7 * 86400, "source_verified": True,
     "audit_count": 3, "upgradeable": False, "subvault": False, "pausable": False,
     "pending_admin_change": False, "emergency_shutdown": False, "exploit_history": False,
     "utilization": 0.6, "bad_debt_usd": 0, "event_count": 5000, "whitelisted": True,
     "deployed_at": "2023-01-01T00:00:00Z", "oracle_warning": False,
     "synthetic_asset": False, "lifetime_return": 0.1, "cagr_1m": 0.05, "cagr_3m": 0.04,
     "net_flow_usd_30d": 1e6, "fee_bps": 10, "peer_fee_bps": 20, "strategy_loss_usd": 0},
]


def grade_of(score: float, table: list[tuple[int, str]]) -> str:
    return next(g for high, g in table if score <= high)


async def rate_and_store(db: Database) -> None:
    """Facts through the real engine, stored as consumers/vault_store.py stores them."""
    engine = VaultEngine(VaultsConfig())
    store = VaultStore(db)
    await store.migrate()
    for raw in FACTS:
        update = decode_facts(msgspec.json.encode(raw))
        records = engine.process(update)
        await store.write_batch([FactsUpdate(update.chain, update.vault, update.ts, update)],
                                fold_facts, [rating_row(r, encode_rating(r)) for r in records])


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[tuple[Any, str]]:
    async with api_client(make_config(f"sqlite:///{tmp_path / 'e8.db'}")) as (client, db):
        await rate_and_store(db)
        key, _ = await new_key(db)
        yield client, key


async def get(client: Any, key: str, path: str) -> tuple[int, Any, Any]:
    resp = await client.get(path, headers={"x-api-key": key})
    return resp.status, await resp.json(), resp.headers


async def test_graded_vault_body_and_headers(live: Any) -> None:
    client, key = live
    status, v2, _ = await get(client, key, f"/vaults/{LOCKED}?chain=eth")
    assert status == 200
    status, body, headers = await get(client, key, f"/v3/vaults/{LOCKED}?chain=eth")
    assert status == 200, body
    assert (headers["Service-Api-Version"], headers["Service-Framework-Version"],
            headers["Service-Grading-Scheme"]) == ("3.0", "v1", "v2")
    assert body["schema_version"] == "3.0"
    # risk and metadata: the v2 record, verbatim (E5 carries the same item fields).
    assert body["risk"] == v2["risk"]
    assert body["metadata"] == {k: v2[k] for k in body["metadata"]}
    assert set(body["metadata"]) >= {"rating", "tier", "verdict", "tags", "address"}
    # Every tag the engine set is the evidence of exactly one criterion, nothing else is.
    evidence = [t for c in body["categories"] for cr in c["criteria"]
                for t in cr["evidence"]["tags"]]
    assert sorted(evidence) == sorted(body["metadata"]["tags"])
    assert "vault-redemption-closed" in evidence
    comp = body["composite"]
    upstream = body["risk"]["overallRisk"]
    assert comp["upstream_risk"] == upstream
    assert comp["score"] == max(comp["framework_score"], upstream)
    assert comp["clamped_by_upstream"] is (upstream > comp["framework_score"])
    # This vault's v2 rating (the engine's floors for closed redemptions) is above what
    # the framework's mean gives: the upstream value sets the composite.
    assert comp["clamped_by_upstream"] is True and comp["score"] == upstream
    # Redemptions closed: never above D, whatever the score says.
    assert [g for _, g in V2].index(comp["grade"]) >= [g for _, g in V2].index("D")
    # The contributors are the categories, with the framework's weights.
    assert {k: v["weight"] for k, v in comp["contributors"].items()} == {
        "smart_contract": 0.2, "operational_governance": 0.2, "asset_collateral": 0.15,
        "market_liquidity": 0.2, "counterparty": 0.1, "hack_exploit_history": 0.15,
        "chain_infrastructure": 0.0}
    results = [cr["result"] for c in body["categories"] for cr in c["criteria"]]
    assert body["coverage"]["criteria_evaluated"] == sum(r != "not_evaluated" for r in results)
    assert body["coverage"]["criteria_live"] + body["coverage"]["criteria_planned"] == len(
        results)


async def test_clean_vault_and_legacy_scheme(live: Any) -> None:
    client, key = live
    status, body, _ = await get(client, key, f"/v3/vaults/{CLEAN}?chain=eth")
    assert status == 200, body
    comp = body["composite"]
    results = {cr["key"]: cr["result"] for c in body["categories"] for cr in c["criteria"]}
    if not body["metadata"]["tags"]:
        # Nothing fired: every evaluated criterion passed, so the framework says 0.
        assert set(results.values()) <= {"pass", "not_evaluated"}
        assert comp["framework_score"] == 0.0
    assert results["sc_audits"] == "pass" and results["og_owner"] == "pass"
    assert comp["grade"] == grade_of(comp["score"], V2)
    status, legacy, headers = await get(
        client, key, f"/v3/vaults/{CLEAN}?chain=eth&grading_scheme=v1&framework_version=v1")
    assert headers["Service-Grading-Scheme"] == "v1"
    assert legacy["composite"]["score"] == comp["score"]
    assert legacy["composite"]["grade"] == grade_of(comp["score"], V1)


@pytest.mark.parametrize(("path", "status", "check"), [
    # The spec's Errors table, row by row.
    (f"/v3/vaults/{LOCKED}?chain=eth&framework_version=v2", 400,
     lambda b: b["supported_versions"] == ["v1"] and b["error"]),
    (f"/v3/vaults/{LOCKED}?chain=eth&grading_scheme=v3", 400,
     lambda b: b["supported_schemes"] == ["v1", "v2"] and b["error"]),
    (f"/v3/vaults/{LOCKED}?chain=solana", 400, lambda b: b["error"] == "Invalid chain"),
    # linea is a valid pegged-token chain (a shared enum) but not a V3 vault chain.
    (f"/v3/vaults/{LOCKED}?chain=linea", 400, lambda b: b["error"] == "Invalid chain"),
    (f"/v3/vaults/{LOCKED}", 400, lambda b: b["error"] == "Invalid chain"),
    # A V3 chain the store has no vault on, and an unknown vault: 404.
    (f"/v3/vaults/{LOCKED}?chain=avax", 404, lambda b: b["error"] == "unknown vault"),
    ("/v3/vaults/0x" + "0c" * 20 + "?chain=eth", 404, lambda b: b["error"]),
    ("/v3/vaults/7xKXtg2CW87d97TXJSDpbD5jBkheTqA83TZRuJosgAsU?chain=sol", 404,
     lambda b: b["error"]),
    ("/v3/vaults/nothex?chain=eth", 400, lambda b: b["parameter"] == "address"),
    (f"/v3/vaults/{LOCKED}?chain=sol", 400, lambda b: b["parameter"] == "address"),
    (f"/v3/vaults/{LOCKED}?chain=eth&hours=1", 400, lambda b: b["parameter"] == "hours"),
])
async def test_error_rows(live: Any, path: str, status: int, check: Any) -> None:
    client, key = live
    got, body, headers = await get(client, key, path)
    assert got == status, body
    assert check(body)
    assert headers["Service-Api-Version"] == "3.0"  # on errors too
    if "supported_versions" not in body and "supported_schemes" not in body:
        assert headers["Service-Grading-Scheme"] == "v2"  # the pins in force, echoed


async def test_one_cu_per_call(live: Any) -> None:
    from monitor import metrics

    client, key = live
    before = metrics.CU_CONSUMED.labels("query")._value.get()
    paths = [f"/v3/vaults/{LOCKED}?chain=eth", f"/v3/vaults/{CLEAN}?chain=eth",
             f"/v3/vaults/{LOCKED}?chain=nope", "/v3/vaults/0x" + "0c" * 20 + "?chain=eth"]
    for path in paths:
        await get(client, key, path)
    await client.get(f"/v3/vaults/{LOCKED}?chain=eth")  # no key: 401, not charged
    status, usage, _ = await get(client, key, "/usage?groupBy=endpoint")
    assert status == 200 and usage["items"] == [{"endpoint": "E8", "cu": len(paths)}]
    assert metrics.CU_CONSUMED.labels("query")._value.get() - before == len(paths)


async def test_the_nine_v3_chains_and_no_other(live: Any) -> None:
    client, key = live
    sol = "7xKXtg2CW87d97TXJSDpbD5jBkheTqA83TZRuJosgAsU"
    for chain in ("eth", "arb", "base", "opt", "pol", "bsc", "avax", "gnosis", "sol"):
        address = sol if chain == "sol" else "0x" + "0c" * 20
        status, body, _ = await get(client, key, f"/v3/vaults/{address}?chain={chain}")
        assert status == 404 and body["error"] == "unknown vault", chain
    for chain in ("linea", "ETH", "solana", "eth,arb", "polygon"):
        status, body, _ = await get(client, key, f"/v3/vaults/{LOCKED}?chain={chain}")
        assert (status, body["error"]) == (400, "Invalid chain"), chain


async def test_rate_limited_calls_are_not_charged(tmp_path: Path) -> None:
    from monitor.config import ApiConfig
    from monitor.storage.usage import UsageStore

    base = make_config(f"sqlite:///{tmp_path / 'rl.db'}")
    config = msgspec.structs.replace(
        base, api=ApiConfig(rate_limit_per_second=0.001, rate_limit_burst=2))
    async with api_client(config) as (client, db):
        await rate_and_store(db)
        key, key_id = await new_key(db)
        statuses = [(await client.get(f"/v3/vaults/{LOCKED}?chain=eth",
                                      headers={"x-api-key": key})).status for _ in range(4)]
        assert statuses == [200, 200, 429, 429]
        totals = await UsageStore(db).totals(key_id, 0, 4e9, "endpoint")
        assert totals.groups == [("E8", 2)]
