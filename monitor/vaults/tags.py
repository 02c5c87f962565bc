"""When each of the 41 tags fires: one row per tag, read from the vault's facts.

A rule names the facts it reads (they become the evidence in the record's contributions) and
a predicate over the facts, the thresholds, the evaluation's event time and the underlying's
depeg tier. An unknown fact never fires a tag: absence of evidence is not evidence (the rating
handles "too little known" separately, by being null).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .catalog import TAG_KEYS, UNDERLYING_DEPEG_CRITICAL, UNDERLYING_DEPEGGING
from .config import VaultThresholds
from .facts import VaultFacts

#: Depeg tiers of the underlying that set each link tag (issue 12): watch and warning mean
#: depegging, critical means critical; ok and premium set neither.
DEPEGGING_TIERS: Final = frozenset({"watch", "warning"})
CRITICAL_TIERS: Final = frozenset({"critical"})


@dataclass(frozen=True, slots=True)
class Context:
    thresholds: VaultThresholds
    #: Event time of this evaluation (epoch seconds): ages are measured from it, never from a
    #: wall clock, so replay and the daemon agree.
    now: float
    #: The underlying's depeg tier as of ``now`` (None: the depeg monitor said nothing).
    underlying_tier: str | None


Predicate = Callable[[VaultFacts, Context], bool]


@dataclass(frozen=True, slots=True)
class Rule:
    key: str
    facts: tuple[str, ...]
    fires: Predicate


def _is(name: str, value: object) -> Predicate:
    return lambda f, _c: getattr(f, name) is value


def _no_timelock(f: VaultFacts, _c: Context) -> bool:
    # DESIGN.md: "0 or absent with owner_kind eoa means none".
    if f.timelock_seconds is not None:
        return f.timelock_seconds == 0
    return f.owner_kind == "eoa"


def _age_below(limit: Callable[[VaultThresholds], float]) -> Predicate:
    def fires(f: VaultFacts, c: Context) -> bool:
        return f.deployed_at is not None and c.now - f.deployed_at < limit(c.thresholds)

    return fires


def _share_price_depeg(f: VaultFacts, c: Context) -> bool:
    if f.share_price is None or not f.expected_share_price:
        return False
    deviation = f.share_price / f.expected_share_price - 1.0
    return abs(deviation) > c.thresholds.share_price_depeg_fraction


def _supply_spike(f: VaultFacts, c: Context) -> bool:
    if f.minted_24h is None or not f.total_supply:
        return False
    return f.minted_24h > c.thresholds.supply_spike_fraction * f.total_supply


def _inactive(f: VaultFacts, c: Context) -> bool:
    t = c.thresholds
    return f.event_count is not None and t.dormant_events <= f.event_count <= t.inactive_events


def _capital_outflow(f: VaultFacts, c: Context) -> bool:
    if f.net_flow_usd_30d is None or f.tvl_usd is None or f.net_flow_usd_30d >= 0:
        return False
    return -f.net_flow_usd_30d > c.thresholds.capital_outflow_fraction * f.tvl_usd


def _high_fees(f: VaultFacts, c: Context) -> bool:
    if f.fee_bps is None or f.peer_fee_bps is None:
        return False
    return f.fee_bps > c.thresholds.high_fee_ratio * f.peer_fee_bps


def _above(name: str, limit: Callable[[VaultThresholds], float]) -> Predicate:
    def fires(f: VaultFacts, c: Context) -> bool:
        value = getattr(f, name)
        return value is not None and value > limit(c.thresholds)

    return fires


def _below(name: str, limit: Callable[[VaultThresholds], float]) -> Predicate:
    def fires(f: VaultFacts, c: Context) -> bool:
        value = getattr(f, name)
        return value is not None and value < limit(c.thresholds)

    return fires


def _less(a: str, b: str) -> Predicate:
    def fires(f: VaultFacts, _c: Context) -> bool:
        x, y = getattr(f, a), getattr(f, b)
        return x is not None and y is not None and x < y

    return fires


def _underlying(tiers: frozenset[str]) -> Predicate:
    return lambda f, c: f.underlying_address is not None and c.underlying_tier in tiers


RULES: Final[tuple[Rule, ...]] = (
    # Vault Structure
    Rule("vault-upgradeable", ("upgradeable",), _is("upgradeable", True)),
    Rule("vault-subvault", ("subvault",), _is("subvault", True)),
    Rule("vault-emergency-shutdown", ("emergency_shutdown",), _is("emergency_shutdown", True)),
    # Governance & Access Control
    Rule("vault-eoa-owner", ("owner_kind",), lambda f, _c: f.owner_kind == "eoa"),
    Rule("vault-pause-capable", ("pausable",), _is("pausable", True)),
    Rule("vault-pending-admin-change", ("pending_admin_change",),
         _is("pending_admin_change", True)),
    Rule("vault-no-timelock", ("timelock_seconds", "owner_kind"), _no_timelock),
    Rule("vault-low-timelock", ("timelock_seconds",),
         lambda f, c: f.timelock_seconds is not None
         and 0 < f.timelock_seconds < c.thresholds.low_timelock_seconds),
    # Liquidity & Withdrawal
    Rule("vault-redemption-closed", ("redemption_open",), _is("redemption_open", False)),
    Rule("vault-high-looping", ("looping_rate",),
         _above("looping_rate", lambda t: t.high_looping_rate)),
    Rule("vault-lockup-7d", ("lockup_seconds",),
         _above("lockup_seconds", lambda t: t.lockup_seconds)),
    Rule("vault-deposit-closed", ("deposit_open",), _is("deposit_open", False)),
    Rule("vault-withdrawal-delay", ("withdrawal_delay_seconds",),
         _above("withdrawal_delay_seconds", lambda t: t.withdrawal_delay_seconds)),
    Rule("vault-high-utilisation", ("utilization",),
         _above("utilization", lambda t: t.high_utilisation)),
    Rule("vault-low-utilisation", ("utilization",),
         _below("utilization", lambda t: t.low_utilisation)),
    Rule("vault-bad-debt", ("bad_debt_usd",), _above("bad_debt_usd", lambda t: t.bad_debt_usd)),
    Rule("vault-lendA-low-liquidity", ("market_liquidity_usd",),
         _below("market_liquidity_usd", lambda t: t.low_market_liquidity_usd)),
    # Code Quality
    Rule("vault-unverified-contract", ("source_verified",), _is("source_verified", False)),
    Rule("vault-no-audits", ("audit_count",), lambda f, _c: f.audit_count == 0),
    Rule("vault-exploit-history", ("exploit_history",), _is("exploit_history", True)),
    Rule("vault-not-battle-tested", ("deployed_at",),
         _age_below(lambda t: t.battle_tested_seconds)),
    # Asset & Market
    Rule("vault-share-price-depeg", ("share_price", "expected_share_price"), _share_price_depeg),
    Rule("vault-oracle-warning", ("oracle_warning",), _is("oracle_warning", True)),
    Rule("vault-lst-redemption-lag", ("lst_redemption_lag_days",),
         _above("lst_redemption_lag_days", lambda t: t.lst_redemption_lag_days)),
    Rule("vault-synth-asset", ("synthetic_asset",), _is("synthetic_asset", True)),
    Rule("vault-supply-spike", ("minted_24h", "total_supply"), _supply_spike),
    Rule(UNDERLYING_DEPEGGING, ("underlying_address",), _underlying(DEPEGGING_TIERS)),
    Rule(UNDERLYING_DEPEG_CRITICAL, ("underlying_address",), _underlying(CRITICAL_TIERS)),
    # Performance
    Rule("vault-dormant", ("event_count",), _below("event_count", lambda t: t.dormant_events)),
    Rule("vault-negative-return", ("lifetime_return",), _below("lifetime_return", lambda t: 0.0)),
    Rule("vault-low-tvl", ("tvl_usd",), _below("tvl_usd", lambda t: t.low_tvl_usd)),
    Rule("vault-inactive", ("event_count",), _inactive),
    Rule("vault-new", ("deployed_at",), _age_below(lambda t: t.new_vault_seconds)),
    Rule("vault-momentum-declining", ("cagr_1m", "cagr_3m"), _less("cagr_1m", "cagr_3m")),
    Rule("vault-capital-outflow", ("net_flow_usd_30d", "tvl_usd"), _capital_outflow),
    Rule("vault-high-fees", ("fee_bps", "peer_fee_bps"), _high_fees),
    Rule("vault-yieldA-eol", ("protocol_eol",), _is("protocol_eol", True)),
    Rule("vault-strategy-loss", ("strategy_loss_usd",),
         _above("strategy_loss_usd", lambda t: t.strategy_loss_usd)),
    Rule("vault-retired", ("retired",), _is("retired", True)),
    # Protocol Risk
    Rule("vault-lendA-not-whitelisted", ("whitelisted",), _is("whitelisted", False)),
    Rule("vault-yieldB-high-risk", ("protocol_high_risk",), _is("protocol_high_risk", True)),
)

RULE_BY_KEY: Final = {r.key: r for r in RULES}
assert set(RULE_BY_KEY) == TAG_KEYS and len(RULES) == 41, "one rule per spec tag"

#: Every fact some tag reads, plus the underlying's risk tier (the Asset & Market base):
#: the facts counted against ``vaults.min_known_facts``.
RATED_FACTS: Final = tuple(sorted({name for r in RULES for name in r.facts} | {
    "underlying_risk"} - {"underlying_address"}))


def evaluate_tags(facts: VaultFacts, context: Context) -> frozenset[str]:
    """The keys of every tag that fires."""
    return frozenset(rule.key for rule in RULES if rule.fires(facts, context))


_RATED_GETTER: Final = operator.attrgetter(*RATED_FACTS)


def known_rated_facts(facts: VaultFacts) -> int:
    return sum(1 for value in _RATED_GETTER(facts) if value is not None)
