"""The spec's 7 vault risk categories and 41 tags: keys, names, severities, meanings.

Exactly the spec's tag keys (other helpers map them to V3 criteria and filter on them), in the
spec's order. What makes a tag fire lives in ``tags.py``; this module is only the catalogue,
with no imports, so config validation can name the known tags.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Category:
    #: The ``type`` of its tags and the key in an Issue's ``categories``. The spec shows only
    #: ``vault_performance_risk``; the other six follow the same pattern.
    key: str
    name: str


@dataclass(frozen=True, slots=True)
class TagInfo:
    key: str
    name: str
    severity: int
    category: str  # Category.key
    description: str


STRUCTURE = Category("vault_structure_risk", "Vault Structure")
GOVERNANCE = Category("vault_governance_risk", "Governance & Access Control")
LIQUIDITY = Category("vault_liquidity_risk", "Liquidity & Withdrawal")
CODE = Category("vault_code_risk", "Code Quality")
ASSET = Category("vault_asset_risk", "Asset & Market")
PERFORMANCE = Category("vault_performance_risk", "Performance")
PROTOCOL = Category("vault_protocol_risk", "Protocol Risk")

#: The seven categories in the spec's order.
CATEGORIES: Final = (STRUCTURE, GOVERNANCE, LIQUIDITY, CODE, ASSET, PERFORMANCE, PROTOCOL)
CATEGORY_BY_KEY: Final = {c.key: c for c in CATEGORIES}


def _t(key: str, name: str, severity: int, category: Category, description: str) -> TagInfo:
    return TagInfo(key, name, severity, category.key, description)


TAGS: Final[tuple[TagInfo, ...]] = (
    _t("vault-upgradeable", "Upgradeable Contract", 6, STRUCTURE, "Proxy can be upgraded by admin"),
    _t("vault-subvault", "Subvault", 3, STRUCTURE, "Vault-of-vault nesting"),
    _t("vault-emergency-shutdown", "Emergency Shutdown", 10, STRUCTURE,
       "Vault in emergency shutdown mode"),
    _t("vault-eoa-owner", "EOA Owner", 6, GOVERNANCE,
       "Owned by an externally owned account, not multisig or timelock"),
    _t("vault-pause-capable", "Pause Capable", 4, GOVERNANCE, "Has pause functionality"),
    _t("vault-pending-admin-change", "Pending Admin Change", 6, GOVERNANCE,
       "Governance admin change pending"),
    _t("vault-no-timelock", "No Timelock", 6, GOVERNANCE, "No timelock delay on admin actions"),
    _t("vault-low-timelock", "Low Timelock", 4, GOVERNANCE, "Timelock shorter than recommended"),
    _t("vault-redemption-closed", "Redemption Closed", 10, LIQUIDITY, "Users cannot withdraw"),
    _t("vault-high-looping", "High Looping Exposure", 7, LIQUIDITY,
       "Significant recursive lending exposure"),
    _t("vault-lockup-7d", "7-Day Lockup", 5, LIQUIDITY, "Lockup exceeding 7 days"),
    _t("vault-deposit-closed", "Deposit Closed", 5, LIQUIDITY, "No longer accepting deposits"),
    _t("vault-withdrawal-delay", "Withdrawal Delay", 4, LIQUIDITY,
       "Processing delay on withdrawals"),
    _t("vault-high-utilisation", "Maxed Utilization", 6, LIQUIDITY, "Utilization above 95%"),
    _t("vault-low-utilisation", "Idle Utilization", 3, LIQUIDITY, "Utilization below 10%"),
    _t("vault-bad-debt", "Bad Debt", 8, LIQUIDITY, "Outstanding bad debt above 1,000 USD"),
    _t("vault-lendA-low-liquidity", "Very Low Liquidity", 7, LIQUIDITY,
       "Underlying lending market liquidity very low"),
    _t("vault-unverified-contract", "Unverified Contract", 10, CODE,
       "Source not verified on a block explorer"),
    _t("vault-no-audits", "No Audits", 6, CODE, "No known security audits"),
    _t("vault-exploit-history", "Exploit History", 8, CODE, "Protocol has a known exploit or hack"),
    _t("vault-not-battle-tested", "Not Battle Tested", 4, CODE, "Less than 6 months on mainnet"),
    _t("vault-share-price-depeg", "Share Price Depeg", 8, ASSET,
       "Share price deviated from expected peg"),
    _t("vault-oracle-warning", "Oracle Warning", 8, ASSET, "Oracle reliability concerns"),
    _t("vault-lst-redemption-lag", "LST Redemption Lag", 5, ASSET,
       "LST collateral with redemption delays"),
    _t("vault-synth-asset", "Synthetic Asset", 5, ASSET, "Holds synthetic or wrapped assets"),
    _t("vault-supply-spike", "Supply Spike", 8, ASSET, "Supply minted in 24h exceeds 40% of total"),
    _t("vault-underlying-depegging", "Underlying Depegging", 7, ASSET,
       "Underlying asset is depegging"),
    _t("vault-underlying-depeg-critical", "Underlying Depeg Critical", 9, ASSET,
       "Critical depeg severity on underlying"),
    _t("vault-dormant", "Dormant Vault", 10, PERFORMANCE, "Fewer than 10 on-chain events"),
    _t("vault-negative-return", "Negative Return", 5, PERFORMANCE, "Negative lifetime return"),
    _t("vault-low-tvl", "Low TVL", 4, PERFORMANCE, "Below minimum TVL threshold"),
    _t("vault-inactive", "Inactive Vault", 4, PERFORMANCE, "10-50 on-chain events"),
    _t("vault-new", "New Vault", 3, PERFORMANCE, "Recently deployed, insufficient history"),
    _t("vault-momentum-declining", "Momentum Declining", 4, PERFORMANCE,
       "1-month CAGR below 3-month CAGR"),
    _t("vault-capital-outflow", "Capital Outflow", 4, PERFORMANCE, "Net capital outflow"),
    _t("vault-high-fees", "High Fees", 4, PERFORMANCE, "Above-average fees"),
    _t("vault-yieldA-eol", "End of Life", 8, PERFORMANCE,
       "No longer actively maintained by its protocol"),
    _t("vault-strategy-loss", "Strategy Loss", 7, PERFORMANCE, "Realized loss event"),
    _t("vault-retired", "Retired Vault", 8, PERFORMANCE, "No longer generating yield"),
    _t("vault-lendA-not-whitelisted", "Not Whitelisted", 5, PROTOCOL,
       "Not on the platform's curated whitelist"),
    _t("vault-yieldB-high-risk", "High Risk", 7, PROTOCOL,
       "Elevated risk per the protocol's own framework"),
)

TAG_BY_KEY: Final = {t.key: t for t in TAGS}
TAG_KEYS: Final = frozenset(TAG_BY_KEY)

#: The two tags the depeg link sets; no fact makes them fire.
UNDERLYING_DEPEGGING: Final = "vault-underlying-depegging"
UNDERLYING_DEPEG_CRITICAL: Final = "vault-underlying-depeg-critical"

assert len(TAGS) == 41 and len(TAG_KEYS) == 41, "the spec lists 41 vault tags"
