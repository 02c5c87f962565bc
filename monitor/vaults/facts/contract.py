"""The wire contract of a fact record (DESIGN.md "Vault facts"): its fields, the values
a field may take, the chains and address forms, and how a refusal is named.

Producers, the daemon, replay and the API read these names; the checks (``checks.py``) and
the codec (``codec.py``) enforce them.
"""

from __future__ import annotations

import re
from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

#: Largest fact record accepted. A fact record is a few hundred bytes; its detail lists
#: (looping markets, code findings, …) can be longer, but real Kafka refuses records over 1 MB
#: by default, so anything near this is garbage.
MAX_FACT_BYTES: Final = 256 * 1024

#: Chains a vault may live on: the six v2 chains, then the three V3 adds (spec, Limits).
VAULT_CHAINS: Final = ("eth", "arb", "base", "opt", "pol", "bsc", "avax", "gnosis", "sol")
#: Chains whose addresses are base58 public keys, kept as given (case matters there).
NON_EVM_CHAINS: Final = frozenset({"sol"})

CONTRACT_TYPES: Final = ("erc4626_vault", "strategy_vault", "lending_wrapper", "bridge_vault")
UNDERLYING_RISKS: Final = ("battle_tested", "medium_risk", "high_risk", "crypto", "unknown")
OWNER_KINDS: Final = ("eoa", "multisig", "timelock", "dao", "unknown")
#: The spec's eight protocol labels; another label is accepted as given (DESIGN.md).
PROTOCOL_LABELS: Final = ("lendA", "lendB", "lendC", "lendD", "lendE", "lendF", "yieldA", "yieldB")

#: Every reason a fact record is refused: the dead-letter header and the metric label.
BAD_FACT_REASONS: Final = (
    "empty", "too_large", "bad_json", "bad_schema", "bad_ts", "unknown_chain", "bad_address",
    "bad_value",
    "bad_key",  # a record whose Kafka key is not its own chain:vault (vault daemon)
)

_EVM_ADDRESS = re.compile(r"^0x[0-9a-f]{40}$")
_BASE58_ADDRESS = re.compile(r"^[1-9A-HJ-NP-Za-km-z]{32,44}$")

Number = float | int | str
FactValue = bool | int | float | str | list[Any] | dict[str, Any]


class BadFacts(ValueError):
    """A fact record that cannot be used; ``reason`` is a short code fit for a metric label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class FactsMessage(msgspec.Struct, forbid_unknown_fields=False):
    """The wire shape of ``vaults.facts`` (DESIGN.md "Vault facts"), every field in its order.

    ``UNSET`` (the default) means the field was absent: the fact stays as it was; ``None`` means
    the record carried ``null``: the fact is cleared.
    """

    ts: Number
    chain: str
    vault: str
    name: str | UnsetType | None = UNSET
    symbol: str | UnsetType | None = UNSET
    protocol: str | UnsetType | None = UNSET
    contract_type: str | UnsetType | None = UNSET
    underlying_symbol: str | UnsetType | None = UNSET
    underlying_address: str | UnsetType | None = UNSET
    underlying_risk: str | UnsetType | None = UNSET
    tvl_usd: Number | UnsetType | None = UNSET
    apy_pct: Number | UnsetType | None = UNSET
    looping_rate: Number | UnsetType | None = UNSET
    upgradeable: bool | UnsetType | None = UNSET
    subvault: bool | UnsetType | None = UNSET
    emergency_shutdown: bool | UnsetType | None = UNSET
    owner_kind: str | UnsetType | None = UNSET
    pausable: bool | UnsetType | None = UNSET
    pending_admin_change: bool | UnsetType | None = UNSET
    timelock_seconds: Number | UnsetType | None = UNSET
    redemption_open: bool | UnsetType | None = UNSET
    deposit_open: bool | UnsetType | None = UNSET
    lockup_seconds: Number | UnsetType | None = UNSET
    withdrawal_delay_seconds: Number | UnsetType | None = UNSET
    utilization: Number | UnsetType | None = UNSET
    bad_debt_usd: Number | UnsetType | None = UNSET
    market_liquidity_usd: Number | UnsetType | None = UNSET
    source_verified: bool | UnsetType | None = UNSET
    audit_count: Number | UnsetType | None = UNSET
    exploit_history: bool | UnsetType | None = UNSET
    deployed_at: Number | UnsetType | None = UNSET
    share_price: Number | UnsetType | None = UNSET
    expected_share_price: Number | UnsetType | None = UNSET
    oracle_warning: bool | UnsetType | None = UNSET
    synthetic_asset: bool | UnsetType | None = UNSET
    lst_redemption_lag_days: Number | UnsetType | None = UNSET
    minted_24h: Number | UnsetType | None = UNSET
    total_supply: Number | UnsetType | None = UNSET
    event_count: Number | UnsetType | None = UNSET
    lifetime_return: Number | UnsetType | None = UNSET
    cagr_1m: Number | UnsetType | None = UNSET
    cagr_3m: Number | UnsetType | None = UNSET
    net_flow_usd_30d: Number | UnsetType | None = UNSET
    fee_bps: Number | UnsetType | None = UNSET
    peer_fee_bps: Number | UnsetType | None = UNSET
    protocol_eol: bool | UnsetType | None = UNSET
    retired: bool | UnsetType | None = UNSET
    protocol_high_risk: bool | UnsetType | None = UNSET
    whitelisted: bool | UnsetType | None = UNSET
    strategy_loss_usd: Number | UnsetType | None = UNSET
    composition: list[dict[str, Any]] | UnsetType | None = UNSET
    looping_markets: list[dict[str, Any]] | UnsetType | None = UNSET
    lst_collateral_markets: list[dict[str, Any]] | UnsetType | None = UNSET
    code_findings: list[dict[str, Any]] | UnsetType | None = UNSET
    lending_market: dict[str, Any] | UnsetType | None = UNSET


def vault_key(chain: str, vault: str) -> str:
    """The Kafka key and the engine's key: ``"{chain}:{vault}"``."""
    return f"{chain}:{vault}"


def normalize_vault_address(chain: str, value: str) -> str | None:
    """Lowercase 0x hex on EVM chains, base58 as given on Solana; None when malformed."""
    text = value.strip()
    if chain in NON_EVM_CHAINS:
        return text if _BASE58_ADDRESS.match(text) else None
    lowered = text.lower()
    return lowered if _EVM_ADDRESS.match(lowered) else None
