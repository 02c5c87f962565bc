"""The ``[vaults]`` config section: every threshold, weight, floor and topic of the vault side.

Where the spec gives a threshold (utilisation 95 % / 10 %, bad debt 1,000 USD, 24 h mint 40 %
of supply, < 10 events dormant, 10-50 inactive, < 6 months, lockup > 7 days) it is the default
here; where it does not, the default is a named choice explained in docs/vaults.md. Everything
can be overridden in the config file or with ``DEPEG_VAULTS__<FIELD>`` variables (nested:
``DEPEG_VAULTS__THRESHOLDS__LOW_TVL_USD=250000``).
"""

from __future__ import annotations

import msgspec

from ..config_section import require

DAY = 86400.0


class VaultThresholds(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    # -- the spec's numbers ----------------------------------------------------------------
    #: vault-high-utilisation: utilization above this (spec: 95 %).
    high_utilisation: float = 0.95
    #: vault-low-utilisation: utilization below this (spec: 10 %).
    low_utilisation: float = 0.10
    #: vault-bad-debt: outstanding bad debt above this many USD (spec: 1,000).
    bad_debt_usd: float = 1000.0
    #: vault-supply-spike: shares minted in 24 h above this share of total supply (spec: 40 %).
    supply_spike_fraction: float = 0.40
    #: vault-dormant: fewer than this many on-chain events (spec: 10).
    dormant_events: int = 10
    #: vault-inactive: from dormant_events up to this many events, inclusive (spec: 10-50).
    inactive_events: int = 50
    #: vault-not-battle-tested: deployed less than this long ago (spec: 6 months).
    battle_tested_seconds: float = 182.0 * DAY
    #: vault-lockup-7d: lockup longer than this (spec: 7 days).
    lockup_seconds: float = 7.0 * DAY
    # -- named choices (docs/vaults.md says why) ------------------------------------------
    #: vault-low-tvl: TVL below this many USD.
    low_tvl_usd: float = 100_000.0
    #: vault-high-looping: more than this share of TVL in recursive lending positions.
    high_looping_rate: float = 0.30
    #: vault-low-timelock: a timelock above 0 but shorter than this (48 h).
    low_timelock_seconds: float = 2.0 * DAY
    #: vault-high-fees: fees above this multiple of the peers' average.
    high_fee_ratio: float = 1.5
    #: vault-capital-outflow: 30-day net outflow above this share of current TVL.
    capital_outflow_fraction: float = 0.10
    #: vault-share-price-depeg: |share_price / expected_share_price - 1| above this.
    share_price_depeg_fraction: float = 0.01
    #: vault-lendA-low-liquidity: liquidity in the underlying lending market(s) below this.
    low_market_liquidity_usd: float = 50_000.0
    #: vault-new: deployed less than this long ago (30 days).
    new_vault_seconds: float = 30.0 * DAY
    #: vault-withdrawal-delay: a withdrawal delay longer than this (any delay by default).
    withdrawal_delay_seconds: float = 0.0
    #: vault-lst-redemption-lag: LST collateral redemption lag longer than this many days.
    lst_redemption_lag_days: float = 0.0
    #: vault-strategy-loss: realised strategy losses above this many USD.
    strategy_loss_usd: float = 0.0


class Floors(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Hard floors for binary dangers: while the tag fires, the rating is at least this.

    Field ``x_y`` is tag ``vault-x-y``. 0 disables a floor.
    """

    emergency_shutdown: float = 90.0
    redemption_closed: float = 80.0
    underlying_depeg_critical: float = 75.0
    unverified_contract: float = 75.0
    dormant: float = 75.0
    underlying_depegging: float = 50.0
    bad_debt: float = 50.0
    exploit_history: float = 35.0

    def by_tag(self) -> dict[str, float]:
        return {f"vault-{name.replace('_', '-')}": float(getattr(self, name))
                for name in self.__struct_fields__ if getattr(self, name) > 0}


class UnderlyingRiskPoints(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Base points of the Asset & Market category from the underlying's risk tier."""

    battle_tested: float = 0.0
    crypto: float = 5.0
    medium_risk: float = 8.0
    unknown: float = 8.0
    high_risk: float = 15.0


DEFAULT_BLOCKING = (
    "vault-redemption-closed", "vault-emergency-shutdown", "vault-dormant",
    "vault-unverified-contract",
)


class VaultsConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    thresholds: VaultThresholds = VaultThresholds()
    floors: Floors = Floors()
    underlying_risk_points: UnderlyingRiskPoints = UnderlyingRiskPoints()
    #: Points a tag adds by severity 3, 4, …, 10 (before the category cap).
    severity_points: tuple[float, ...] = (3.0, 5.0, 7.0, 9.0, 12.0, 16.0, 25.0, 30.0)
    #: At most this many points from one category, so one noisy category cannot max a vault
    #: out on its own (floors still can).
    category_cap: float = 40.0
    #: Tags that make the verdict do_not_list whatever the rating.
    blocking_tags: tuple[str, ...] = DEFAULT_BLOCKING
    #: A vault is rated only when at least this many of the facts the rating reads are known;
    #: below that its rating is null and its tier unknown (unknown is never shown as safe).
    min_known_facts: int = 5
    #: attention_needed also when the rating rose by this many points within this window.
    attention_rise_points: float = 10.0
    attention_window_seconds: float = DAY
    # -- the vault daemon ---------------------------------------------------------------
    facts_topic: str = "vaults.facts"
    ratings_topic: str = "vaults.ratings"
    dlq_topic: str = "vaults.facts.dlq"
    #: Compacted: one state record per vault per checkpoint (internal, not a contract).
    state_topic: str = "vaults.state"
    group: str = "depeg-vaults"

    def __post_init__(self) -> None:
        # The catalog (~1.5 ms to import) only to check tags other than the defaults, which
        # are catalog tags (tests/vaults/test_vault_config.py): every command builds this
        # section, a replay included.
        if self.blocking_tags != DEFAULT_BLOCKING:
            from .catalog import TAG_KEYS

            unknown = sorted(set(self.blocking_tags) - TAG_KEYS)
            if unknown:
                raise ValueError(f"vaults.blocking_tags: unknown tag keys {unknown}")
        t = self.thresholds
        floors = self.floors.by_tag().values()
        require("vaults", [
            (len(self.severity_points) == 8,
             "severity_points: give 8 values, for severities 3 to 10"),
            (not (any(p < 0 for p in self.severity_points) or self.category_cap < 0),
             "severity_points and category_cap must be >= 0"),
            (not (min(floors, default=0) < 0 or max(floors, default=0) > 100),
             "floors: each floor is 0-100"),
            (t.dormant_events <= t.inactive_events,
             "thresholds: dormant_events must not exceed inactive_events"),
        ])
