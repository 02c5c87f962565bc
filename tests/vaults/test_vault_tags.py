"""Each of the 41 tags, one table row: it fires on the wrong side of its threshold and not on
the right side (the spec's numbers where it gives them, the documented defaults otherwise)."""

from __future__ import annotations

from typing import Any

import pytest

from monitor.vaults.catalog import TAG_KEYS, TAGS
from monitor.vaults.config import VaultThresholds
from monitor.vaults.facts import VaultFacts
from monitor.vaults.tags import Context, evaluate_tags

NOW = 1_700_000_000.0
DAY = 86400.0
USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"

#: (tag, facts on the wrong side, facts on the right side, underlying depeg tier wrong/right)
Case = tuple[str, dict[str, Any], dict[str, Any]]

CASES: list[Case] = [
    ("vault-upgradeable", {"upgradeable": True}, {"upgradeable": False}),
    ("vault-subvault", {"subvault": True}, {"subvault": False}),
    ("vault-emergency-shutdown", {"emergency_shutdown": True}, {"emergency_shutdown": False}),
    ("vault-eoa-owner", {"owner_kind": "eoa"}, {"owner_kind": "multisig"}),
    ("vault-pause-capable", {"pausable": True}, {"pausable": False}),
    ("vault-pending-admin-change", {"pending_admin_change": True},
     {"pending_admin_change": False}),
    ("vault-no-timelock", {"timelock_seconds": 0.0}, {"timelock_seconds": 1.0}),
    # DESIGN.md: absent timelock with an EOA owner also means none…
    ("vault-no-timelock", {"owner_kind": "eoa"}, {"owner_kind": "timelock"}),
    ("vault-low-timelock", {"timelock_seconds": 2 * DAY - 1}, {"timelock_seconds": 2 * DAY}),
    # …and a zero timelock is "no timelock", not "low timelock".
    ("vault-low-timelock", {"timelock_seconds": 1.0}, {"timelock_seconds": 0.0}),
    ("vault-redemption-closed", {"redemption_open": False}, {"redemption_open": True}),
    ("vault-high-looping", {"looping_rate": 0.31}, {"looping_rate": 0.30}),
    ("vault-lockup-7d", {"lockup_seconds": 7 * DAY + 1}, {"lockup_seconds": 7 * DAY}),
    ("vault-deposit-closed", {"deposit_open": False}, {"deposit_open": True}),
    ("vault-withdrawal-delay", {"withdrawal_delay_seconds": 60.0},
     {"withdrawal_delay_seconds": 0.0}),
    ("vault-high-utilisation", {"utilization": 0.951}, {"utilization": 0.95}),
    ("vault-low-utilisation", {"utilization": 0.099}, {"utilization": 0.10}),
    ("vault-bad-debt", {"bad_debt_usd": 1000.01}, {"bad_debt_usd": 1000.0}),
    ("vault-lendA-low-liquidity", {"market_liquidity_usd": 49_999.0},
     {"market_liquidity_usd": 50_000.0}),
    ("vault-unverified-contract", {"source_verified": False}, {"source_verified": True}),
    ("vault-no-audits", {"audit_count": 0}, {"audit_count": 1}),
    ("vault-exploit-history", {"exploit_history": True}, {"exploit_history": False}),
    ("vault-not-battle-tested", {"deployed_at": NOW - 181 * DAY},
     {"deployed_at": NOW - 182 * DAY}),
    ("vault-share-price-depeg", {"share_price": 1.0101, "expected_share_price": 1.0},
     {"share_price": 1.0099, "expected_share_price": 1.0}),
    ("vault-share-price-depeg", {"share_price": 0.9899, "expected_share_price": 1.0},
     {"share_price": 0.9901, "expected_share_price": 1.0}),
    ("vault-oracle-warning", {"oracle_warning": True}, {"oracle_warning": False}),
    ("vault-lst-redemption-lag", {"lst_redemption_lag_days": 0.5},
     {"lst_redemption_lag_days": 0.0}),
    ("vault-synth-asset", {"synthetic_asset": True}, {"synthetic_asset": False}),
    ("vault-supply-spike", {"minted_24h": 40.01, "total_supply": 100.0},
     {"minted_24h": 40.0, "total_supply": 100.0}),
    ("vault-underlying-depegging", {"underlying_address": USDC, "@tier": "watch"},
     {"underlying_address": USDC, "@tier": "ok"}),
    ("vault-underlying-depegging", {"underlying_address": USDC, "@tier": "warning"},
     {"underlying_address": USDC, "@tier": "critical"}),
    ("vault-underlying-depeg-critical", {"underlying_address": USDC, "@tier": "critical"},
     {"underlying_address": USDC, "@tier": "warning"}),
    ("vault-underlying-depeg-critical", {"underlying_address": USDC, "@tier": "critical"},
     {"underlying_address": USDC, "@tier": "premium"}),
    ("vault-dormant", {"event_count": 9}, {"event_count": 10}),
    ("vault-negative-return", {"lifetime_return": -0.0001}, {"lifetime_return": 0.0}),
    ("vault-low-tvl", {"tvl_usd": 99_999.0}, {"tvl_usd": 100_000.0}),
    ("vault-inactive", {"event_count": 10}, {"event_count": 9}),
    ("vault-inactive", {"event_count": 50}, {"event_count": 51}),
    ("vault-new", {"deployed_at": NOW - 30 * DAY + 1}, {"deployed_at": NOW - 30 * DAY}),
    ("vault-momentum-declining", {"cagr_1m": 0.049, "cagr_3m": 0.05},
     {"cagr_1m": 0.05, "cagr_3m": 0.05}),
    ("vault-capital-outflow", {"net_flow_usd_30d": -100.01, "tvl_usd": 1000.0},
     {"net_flow_usd_30d": -100.0, "tvl_usd": 1000.0}),
    ("vault-high-fees", {"fee_bps": 150.1, "peer_fee_bps": 100.0},
     {"fee_bps": 150.0, "peer_fee_bps": 100.0}),
    ("vault-yieldA-eol", {"protocol_eol": True}, {"protocol_eol": False}),
    ("vault-strategy-loss", {"strategy_loss_usd": 0.01}, {"strategy_loss_usd": 0.0}),
    ("vault-retired", {"retired": True}, {"retired": False}),
    ("vault-lendA-not-whitelisted", {"whitelisted": False}, {"whitelisted": True}),
    ("vault-yieldB-high-risk", {"protocol_high_risk": True}, {"protocol_high_risk": False}),
]


def tags_of(facts: dict[str, Any]) -> frozenset[str]:
    facts = dict(facts)
    tier = facts.pop("@tier", None)
    return evaluate_tags(VaultFacts(**facts), Context(VaultThresholds(), NOW, tier))


def test_the_table_covers_all_41_spec_tags() -> None:
    assert len(TAGS) == 41
    assert {case[0] for case in CASES} == TAG_KEYS


@pytest.mark.parametrize(("tag", "wrong", "right"), CASES, ids=[c[0] for c in CASES])
def test_tag_fires_on_the_wrong_side_of_its_threshold_only(tag: str, wrong: dict[str, Any],
                                                            right: dict[str, Any]) -> None:
    assert tag in tags_of(wrong)
    assert tag not in tags_of(right)


def test_unknown_facts_fire_nothing() -> None:
    assert tags_of({}) == frozenset()
    # A depeg tier alone does not tag a vault whose underlying is unknown.
    assert tags_of({"@tier": "critical"}) == frozenset()


def test_thresholds_are_configurable() -> None:
    lenient = VaultThresholds(low_tvl_usd=10.0, high_utilisation=0.99)
    facts = VaultFacts(tvl_usd=50.0, utilization=0.97)
    assert evaluate_tags(facts, Context(VaultThresholds(), NOW, None)) == {
        "vault-low-tvl", "vault-high-utilisation"}
    assert evaluate_tags(facts, Context(lenient, NOW, None)) == frozenset()
