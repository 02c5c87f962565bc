"""The value sets of the vault parameters (spec: Vault, E4, E5, Limits)."""

from __future__ import annotations

#: v2 vault chains (Limits: "Vault chains (v2)").
VAULT_CHAINS: tuple[str, ...] = ("eth", "arb", "base", "opt", "pol", "bsc")
VAULT_TIERS: tuple[str, ...] = ("low", "medium", "high", "critical", "unknown")
VERDICTS: tuple[str, ...] = ("do_not_list", "review_required", "caution", "safe_to_list")
PROTOCOLS: tuple[str, ...] = ("lendA", "lendB", "lendC", "lendD", "lendE", "lendF", "yieldA",
                              "yieldB")
CONTRACT_TYPES: tuple[str, ...] = ("erc4626_vault", "strategy_vault", "lending_wrapper",
                                   "bridge_vault")
UNDERLYING_RISKS: tuple[str, ...] = ("battle_tested", "medium_risk", "high_risk", "crypto",
                                     "unknown")
#: The 41 tag keys of the spec's tag tables (riskFlags values).
TAG_KEYS: tuple[str, ...] = (
    "vault-upgradeable", "vault-subvault", "vault-emergency-shutdown",
    "vault-eoa-owner", "vault-pause-capable", "vault-pending-admin-change", "vault-no-timelock",
    "vault-low-timelock",
    "vault-redemption-closed", "vault-high-looping", "vault-lockup-7d", "vault-deposit-closed",
    "vault-withdrawal-delay", "vault-high-utilisation", "vault-low-utilisation",
    "vault-bad-debt", "vault-lendA-low-liquidity",
    "vault-unverified-contract", "vault-no-audits", "vault-exploit-history",
    "vault-not-battle-tested",
    "vault-share-price-depeg", "vault-oracle-warning", "vault-lst-redemption-lag",
    "vault-synth-asset", "vault-supply-spike", "vault-underlying-depegging",
    "vault-underlying-depeg-critical",
    "vault-dormant", "vault-negative-return", "vault-low-tvl", "vault-inactive", "vault-new",
    "vault-momentum-declining", "vault-capital-outflow", "vault-high-fees", "vault-yieldA-eol",
    "vault-strategy-loss", "vault-retired",
    "vault-lendA-not-whitelisted", "vault-yieldB-high-risk",
)
assert len(TAG_KEYS) == 41
