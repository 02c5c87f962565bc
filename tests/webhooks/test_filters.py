"""Subscription filters: tiers on the new tier, chains, tokens (any case), |deviation|, AND."""

from __future__ import annotations

import pytest

from monitor.webhooks.filters import Filters, decode_filters, encode_filters
from tests.webhook_support import TOKEN, tier_change

EVENT = tier_change(new_tier="warning", old_tier="critical", chain="eth", deviation_pct=-2.5)


@pytest.mark.parametrize("filters, expected", [
    (Filters(), True),
    (Filters(tiers=["warning"]), True),
    (Filters(tiers=["critical"]), False),              # the old tier does not count
    (Filters(chains=["eth", "arb"]), True),
    (Filters(chains=["arb"]), False),
    (Filters(tokens=[TOKEN.upper().replace("0X", "0x")]), True),
    (Filters(tokens=["0x" + "1" * 40]), False),
    (Filters(min_deviation_pct=2.5), True),            # at least
    (Filters(min_deviation_pct=2.0), True),            # below peg counts by its size
    (Filters(min_deviation_pct=2.6), False),
    (Filters(tiers=["warning"], chains=["eth"], tokens=[TOKEN], min_deviation_pct=1), True),
    (Filters(tiers=["warning"], chains=["arb"], tokens=[TOKEN], min_deviation_pct=1), False),
])
def test_matching(filters: Filters, expected: bool) -> None:
    assert filters.matches(EVENT.data) is expected


def test_premium_above_peg_matches_by_size() -> None:
    premium = tier_change(new_tier="premium", deviation_pct=3.0)
    assert Filters(tiers=["premium"], min_deviation_pct=3.0).matches(premium.data)


def test_round_trip_uses_spec_names() -> None:
    f = Filters(tiers=["ok"], tokens=["0xAB" + "c" * 38], min_deviation_pct=1.5).normalized()
    text = encode_filters(f)
    assert '"minDeviationPct":1.5' in text and "0xab" in text and "chains" not in text
    assert decode_filters(text) == f


@pytest.mark.parametrize("variable, value", [
    ("MAX_ATTEMPTS", "0"), ("TIMEOUT_SECONDS", "0"), ("BACKOFF_JITTER", "1.5"),
    ("BACKOFF_BASE_SECONDS", "5000"), ("PER_ENDPOINT_CONCURRENCY", "0"),
])
def test_delivery_config_is_validated(variable: str, value: str) -> None:
    from monitor.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="delivery"):
        load_config(env={f"DEPEG_DELIVERY__{variable}": value})
