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
def test_tier_and_verdict_follow_the_spec_tables(rating: int | None, tags: frozenset[str]):
    assert tier_for(rating) == spec_tier(rating)
    assert verdict_for(rating, tags, CONFIG.blocking_tags) == spec_verdict(rating, tags)


@given(tag_sets, st.sampled_from(ALL_TAGS), risks, st.integers(0, len(RATED_FACTS)))
def test_adding_a_tag_never_lowers_the_rating(tags: frozenset[str], extra: str,
                                              risk: str | None, known: int):
    before = score(tags, risk, known, CONFIG)
    after = score(tags | {extra}, risk, known, CONFIG)
    if before is None:
        assert after is None  # rated or not depends on the facts known, not on tags
    else:
        assert after is not None and after >= before
        assert 0 <= before <= 100


@settings(max_examples=200)
@given(tag_sets, risks)
def test_contributions_add_up_to_the_rating(tags: frozenset[str], risk: str | None):
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


def test_floors_for_binary_dangers():
    known = len(RATED_FACTS)
    assert score({"vault-redemption-closed"}, None, known, CONFIG) == 80
    assert score({"vault-emergency-shutdown"}, None, known, CONFIG) == 90
    assert score({UNDERLYING_DEPEG_CRITICAL}, "battle_tested", known, CONFIG) == 75
    assert tier_for(score({UNDERLYING_DEPEG_CRITICAL}, None, known, CONFIG)) == "critical"


def test_too_few_facts_means_unrated_never_safe():
    assert score(set(), "battle_tested", CONFIG.min_known_facts - 1, CONFIG) is None
    assert tier_for(None) == "unknown"
    assert verdict_for(None, set(), CONFIG.blocking_tags) == "caution"
    assert verdict_for(None, {"vault-dormant"}, CONFIG.blocking_tags) == "do_not_list"


def test_explanation_names_the_floor_and_the_biggest_reasons():
    tags = frozenset({"vault-redemption-closed", "vault-eoa-owner", "vault-no-timelock"})
    result = rate(tags, VaultFacts(), len(RATED_FACTS), CONFIG, None)
    assert result.rating == 80
    assert result.explanation.startswith("80 because users cannot withdraw (floor 80)")
    assert "externally owned account" in result.explanation
