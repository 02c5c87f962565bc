"""Rating, tier and verdict: the spec's tables, checked by property tests against an
independent reading of them, and the rating's monotonicity in the tag set."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.vaults.catalog import TAG_KEYS, UNDERLYING_DEPEG_CRITICAL
from monitor.vaults.config import DEFAULT_BLOCKING, VaultsConfig
from monitor.vaults.facts import UNDERLYING_RISKS, VaultFacts
from monitor.vaults.rating import rate, score
from monitor.vaults.tags import RATED_FACTS
from monitor.vaults.verdict import tier_for, verdict_for

CONFIG = VaultsConfig()
ALL_TAGS = sorted(TAG_KEYS)
tag_sets = st.frozensets(st.sampled_from(ALL_TAGS))
ratings = st.one_of(st.none(), st.integers(0, 100))
risks = st.one_of(st.none(), st.sampled_from(UNDERLYING_RISKS))


def spec_tier(rating: int | None) -> str:
    """Spec, Resources > Vault > Vault tiers."""
    if rating is None:
        return "unknown"
    for tier, low, high in (("critical", 75, 100), ("high", 50, 74), ("medium", 25, 49),
                            ("low", 0, 24)):
        if low <= rating <= high:
            return tier
    raise AssertionError(rating)


def spec_verdict(rating: int | None, tags: frozenset[str]) -> str:
    """Spec, Listing verdicts, first matching row wins; blocking tags from the issue."""
    if tags & set(DEFAULT_BLOCKING) or (rating is not None and rating >= 75):
        return "do_not_list"
    if rating is not None and rating >= 55:
        return "review_required"
    if rating is None or rating >= 30:
        return "caution"
    return "safe_to_list"


@given(ratings, tag_sets)
def test_tier_and_verdict_follow_the_spec_tables(rating: int | None, tags: frozenset[str]) -> None:
    assert tier_for(rating) == spec_tier(rating)
    assert verdict_for(rating, tags, CONFIG.blocking_tags) == spec_verdict(rating, tags)


@given(tag_sets, st.sampled_from(ALL_TAGS), risks, st.integers(0, len(RATED_FACTS)))
def test_adding_a_tag_never_lowers_the_rating(tags: frozenset[str], extra: str,
                                              risk: str | None, known: int) -> None:
    before = score(tags, risk, known, CONFIG)
    after = score(tags | {extra}, risk, known, CONFIG)
    if before is None:
        assert after is None  # rated or not depends on the facts known, not on tags
    else:
        assert after is not None and after >= before
        assert 0 <= before <= 100


@settings(max_examples=200)
@given(tag_sets, risks)
def test_contributions_add_up_to_the_rating(tags: frozenset[str], risk: str | None) -> None:
    result = rate(tags, VaultFacts(underlying_risk=risk), len(RATED_FACTS), CONFIG, "critical")
    assert result.rating is not None
    total = min(100.0, sum(c.points for c in result.contributions))
    if result.floor is None:
        assert result.rating == int(total + 0.5)
    else:
        assert result.rating == result.floor.rating > total
        assert result.floor.tag in tags
    # Every tag is accounted for in exactly one category.
    listed = [t for c in result.contributions for t in c.tags]
    assert sorted(listed) == sorted(tags)


def test_floors_for_binary_dangers() -> None:
    known = len(RATED_FACTS)
    assert score({"vault-redemption-closed"}, None, known, CONFIG) == 80
    assert score({"vault-emergency-shutdown"}, None, known, CONFIG) == 90
    assert score({UNDERLYING_DEPEG_CRITICAL}, "battle_tested", known, CONFIG) == 75
    assert tier_for(score({UNDERLYING_DEPEG_CRITICAL}, None, known, CONFIG)) == "critical"


def test_too_few_facts_means_unrated_never_safe() -> None:
    assert score(set(), "battle_tested", CONFIG.min_known_facts - 1, CONFIG) is None
    assert tier_for(None) == "unknown"
    assert verdict_for(None, set(), CONFIG.blocking_tags) == "caution"
    assert verdict_for(None, {"vault-dormant"}, CONFIG.blocking_tags) == "do_not_list"


def test_explanation_names_the_floor_and_the_biggest_reasons() -> None:
    tags = frozenset({"vault-redemption-closed", "vault-eoa-owner", "vault-no-timelock"})
    result = rate(tags, VaultFacts(), len(RATED_FACTS), CONFIG, None)
    assert result.rating == 80
    assert result.explanation.startswith("80 because users cannot withdraw (floor 80)")
    assert "externally owned account" in result.explanation


_flag = st.one_of(st.none(), st.booleans())
_amount = st.one_of(st.none(), st.floats(0, 1e9, allow_nan=False))
_fraction = st.one_of(st.none(), st.floats(0, 1, allow_nan=False))
random_facts = st.fixed_dictionaries({
    "underlying_risk": risks, "owner_kind": st.one_of(st.none(), st.sampled_from(
        ("eoa", "multisig", "timelock", "dao", "unknown"))),
    "upgradeable": _flag, "emergency_shutdown": _flag, "redemption_open": _flag,
    "source_verified": _flag, "exploit_history": _flag, "pausable": _flag,
    "timelock_seconds": st.one_of(st.none(), st.sampled_from((0.0, 3600.0, 864000.0))),
    "tvl_usd": _amount, "bad_debt_usd": _amount, "utilization": _fraction,
    "looping_rate": _fraction, "event_count": st.one_of(st.none(), st.integers(0, 200)),
    "audit_count": st.one_of(st.none(), st.integers(0, 3)),
    "fee_bps": _amount, "peer_fee_bps": _amount,
})


@settings(max_examples=150)
@given(random_facts, st.one_of(st.none(), st.sampled_from(
    ("ok", "watch", "warning", "critical", "premium"))))
def test_engine_records_take_tier_and_verdict_from_rating_and_tags_only(
        fields: dict[str, object], depeg_tier: str | None) -> None:
    """Whatever the facts, a published record's tier and verdict are the spec's functions of
    its own rating and tags, and its rating is the formula over its own tags."""
    import msgspec

    from monitor.vaults.depeg_link import DepegChange
    from monitor.vaults.engine import VaultEngine
    from monitor.vaults.facts import FactsMessage, make_update

    usdc = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
    engine = VaultEngine(CONFIG)
    if depeg_tier is not None:
        engine.on_depeg(DepegChange(1.0, "eth", usdc, depeg_tier))
    message = {"ts": 100.0, "chain": "eth", "vault": "0x" + "9" * 40,
               "underlying_address": usdc,
               **{k: v for k, v in fields.items() if v is not None}}
    records = engine.process(make_update(msgspec.convert(message, FactsMessage)))
    assert len(records) == 1
    record = records[0]
    state = engine.state(record.key)
    assert state is not None
    tags = frozenset(record.tags)
    assert record.tier == spec_tier(record.rating)
    assert record.verdict == spec_verdict(record.rating, tags)
    assert record.rating == score(tags, state.facts.underlying_risk, record.known_facts, CONFIG)
