"""The framework v1 file: its rules, the 41 vault tags, and scoring by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.framework.composite import score
from monitor.framework.model import CATEGORY_KEYS, FrameworkError, load_framework, parse_framework

# The spec's 41 vault risk tags (section "Vault risk tags (41)"), copied here so the test
# does not take the list from the code it checks.
SPEC_TAGS = """
vault-upgradeable vault-subvault vault-emergency-shutdown
vault-eoa-owner vault-pause-capable vault-pending-admin-change vault-no-timelock
vault-low-timelock
vault-redemption-closed vault-high-looping vault-lockup-7d vault-deposit-closed
vault-withdrawal-delay vault-high-utilisation vault-low-utilisation vault-bad-debt
vault-lendA-low-liquidity
vault-unverified-contract vault-no-audits vault-exploit-history vault-not-battle-tested
vault-share-price-depeg vault-oracle-warning vault-lst-redemption-lag vault-synth-asset
vault-supply-spike vault-underlying-depegging vault-underlying-depeg-critical
vault-dormant vault-negative-return vault-low-tvl vault-inactive vault-new
vault-momentum-declining vault-capital-outflow vault-high-fees vault-yieldA-eol
vault-strategy-loss vault-retired
vault-lendA-not-whitelisted vault-yieldB-high-risk
""".split()

V1_TEXT = (Path(__file__).resolve().parents[2] / "monitor" / "framework" / "v1.toml").read_text()


def test_every_spec_tag_belongs_to_exactly_one_criterion() -> None:
    assert len(SPEC_TAGS) == len(set(SPEC_TAGS)) == 41
    fw = load_framework("v1")
    memberships = [tag for _, crit in fw.criteria() for tag in crit.tags]
    assert sorted(memberships) == sorted(SPEC_TAGS)  # each exactly once, nothing else


def test_categories_weights_and_status() -> None:
    fw = load_framework("v1")
    weights = {c.key: c.weight for c in fw.categories}
    assert tuple(weights) == CATEGORY_KEYS
    assert weights == {"smart_contract": 0.20, "operational_governance": 0.20,
                       "asset_collateral": 0.15, "market_liquidity": 0.20,
                       "counterparty": 0.10, "hack_exploit_history": 0.15,
                       "chain_infrastructure": 0.0}
    for _, crit in fw.criteria():
        assert crit.status in ("live", "planned")
        assert crit.status == "planned" or (crit.facts and crit.tags), crit.key
    assert all(c.status == "planned"
               for c in fw.categories[-1].criteria)  # chain_infrastructure is reserved


def _broken(old: str, new: str) -> str:
    assert old in V1_TEXT
    return V1_TEXT.replace(old, new, 1)


@pytest.mark.parametrize(("text", "message"), [
    (_broken("weight = 0.10", "weight = 0.11"), "sum to"),
    (_broken('"vault-no-audits" = "warn"', '"vault-no-audits" = "warn", '
             '"vault-upgradeable" = "fail"'), "belongs to both"),
    (_broken('tags = { "vault-strategy-loss" = "fail" }',
             'tags = { "vault-strategy-loss" = "fail" }\nfacts2 = 1'), "invalid framework"),
    (_broken('status = "planned"\ndescription = "Severity',
             'status = "soon"\ndescription = "Severity'), "invalid framework"),
    (_broken('"vault-exploit-history" = "fail"', '"vault-exploit-history" = "bad"'),
     "invalid framework"),
    (_broken('key = "counterparty"', 'key = "people"'), "categories must be"),
    (_broken('max_grade = "D"', 'max_grade = "E"'), "not a grade"),
    (_broken('facts = ["owner_kind"]\ntags', 'facts = []\ntags'), "names no facts"),
    (_broken('key = "ml_tvl"', 'key = "ml_fees"'), "appears twice"),
    ("version = ", "invalid framework"),
])
def test_loader_refuses_broken_files(text: str, message: str) -> None:
    with pytest.raises(FrameworkError, match=message):
        parse_framework(text)


def test_unknown_version() -> None:
    with pytest.raises(FrameworkError):
        load_framework("v9")


def test_scoring_by_hand() -> None:
    """Two categories evaluated; everything else unobserved."""
    fw = load_framework()
    tags = {"vault-no-audits", "vault-unverified-contract", "vault-redemption-closed"}
    facts = {"source_verified": False, "audit_count": 0, "upgradeable": False,
             "redemption_open": False, "deposit_open": True, "tvl_usd": 5e6,
             "exploit_history": None}
    r = score(fw, tags, facts, upstream=30.0, scheme="v2")
    cats = {c.key: c for c in r.categories}
    # smart_contract: fail (100), warn (50), pass (0) -> 50; the rest not evaluated
    assert cats["smart_contract"].score == 50.0
    sc = {c.key: c for c in cats["smart_contract"].criteria}
    assert sc["sc_source_verified"].outcome == "fail"
    assert sc["sc_source_verified"].tags == ["vault-unverified-contract"]
    assert sc["sc_source_verified"].facts == {"source_verified": False}
    assert sc["sc_audits"].outcome == "warn" and sc["sc_upgradeability"].outcome == "pass"
    assert sc["sc_battle_tested"].outcome == "not_evaluated"
    assert sc["sc_code_findings"].outcome == "not_evaluated"  # planned
    # market_liquidity: redemption fail 100, deposits pass 0, tvl pass 0 -> 33.33
    assert cats["market_liquidity"].score == 33.33
    assert cats["hack_exploit_history"].score is None  # a None fact is not observed
    # composite: (0.2 * 50 + 0.2 * 33.33) / 0.4 = 41.665 -> 41.67 (> upstream 30)
    assert r.composite.framework_score == 41.67 and r.composite.score == 41.67
    assert r.composite.clamped_by_upstream is False
    assert r.composite.grade == "D"  # B- by score, capped: redemptions are blocked
    assert r.composite.caps_applied == ["blocked_redemption"]
    assert r.coverage() == {"criteria_total": 42, "criteria_live": 35,
                            "criteria_planned": 7, "criteria_evaluated": 6}


def test_upstream_clamps_and_nothing_observed() -> None:
    fw = load_framework()
    r = score(fw, set(), {"source_verified": True}, upstream=62.5, scheme="v1")
    assert r.composite.framework_score == 0.0
    assert (r.composite.score, r.composite.clamped_by_upstream) == (62.5, True)
    assert (r.composite.grade, r.composite.stars) == ("D", 2)
    empty = score(fw, set(), {}, upstream=None, scheme="v2")
    assert empty.composite.score is None and empty.composite.grade is None
    assert empty.coverage()["criteria_evaluated"] == 0


def test_framework_tags_are_the_engines_tags() -> None:
    """The vault engine's catalogue and the framework name the same 41 tags."""
    from monitor.vaults.catalog import TAGS

    assert sorted(t.key for t in TAGS) == sorted(load_framework().tag_owner()) == sorted(
        SPEC_TAGS)


def test_every_fact_a_criterion_reads_is_a_vault_fact() -> None:
    """A misspelt fact would leave its criterion never evaluated, silently."""
    import msgspec

    from monitor.vaults.facts import VaultFacts

    fields = {f.name for f in msgspec.structs.fields(VaultFacts)}
    named = {f for _, crit in load_framework().criteria() for f in crit.facts}
    assert named - fields == set()
