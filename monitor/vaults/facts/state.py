"""What is known about one vault (:class:`VaultFacts`), one validated record
(:class:`FactUpdate`) and the merge of the one into the other, which is pure."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from .contract import vault_key


class CompositionEntry(msgspec.Struct, frozen=True, omit_defaults=True):
    """One underlying of a vault's allocation (``composition`` item), validated."""

    symbol: str
    address: str | None = None
    share_pct: float | None = None


class VaultFacts(msgspec.Struct, frozen=True, omit_defaults=True):
    """Everything currently known about one vault: the merge of every update so far.

    ``None`` = not known. Numbers are floats (``audit_count``/``event_count`` ints), times are
    epoch seconds. Encoded into the daemon's state checkpoints, so fields are only ever added.
    """

    name: str | None = None
    symbol: str | None = None
    protocol: str | None = None
    contract_type: str | None = None
    underlying_symbol: str | None = None
    underlying_address: str | None = None
    underlying_risk: str | None = None
    tvl_usd: float | None = None
    apy_pct: float | None = None
    looping_rate: float | None = None
    upgradeable: bool | None = None
    subvault: bool | None = None
    emergency_shutdown: bool | None = None
    owner_kind: str | None = None
    pausable: bool | None = None
    pending_admin_change: bool | None = None
    timelock_seconds: float | None = None
    redemption_open: bool | None = None
    deposit_open: bool | None = None
    lockup_seconds: float | None = None
    withdrawal_delay_seconds: float | None = None
    utilization: float | None = None
    bad_debt_usd: float | None = None
    market_liquidity_usd: float | None = None
    source_verified: bool | None = None
    audit_count: int | None = None
    exploit_history: bool | None = None
    deployed_at: float | None = None
    share_price: float | None = None
    expected_share_price: float | None = None
    oracle_warning: bool | None = None
    synthetic_asset: bool | None = None
    lst_redemption_lag_days: float | None = None
    minted_24h: float | None = None
    total_supply: float | None = None
    event_count: int | None = None
    lifetime_return: float | None = None
    cagr_1m: float | None = None
    cagr_3m: float | None = None
    net_flow_usd_30d: float | None = None
    fee_bps: float | None = None
    peer_fee_bps: float | None = None
    protocol_eol: bool | None = None
    retired: bool | None = None
    protocol_high_risk: bool | None = None
    whitelisted: bool | None = None
    strategy_loss_usd: float | None = None
    composition: tuple[CompositionEntry, ...] | None = None
    looping_markets: tuple[dict[str, Any], ...] | None = None
    lst_collateral_markets: tuple[dict[str, Any], ...] | None = None
    code_findings: tuple[dict[str, Any], ...] | None = None
    lending_market: dict[str, Any] | None = None


#: Every fact field (everything but ts, chain, vault), in contract order.
FACT_FIELDS: Final[tuple[str, ...]] = VaultFacts.__struct_fields__


class FactUpdate(msgspec.Struct, frozen=True):
    """A validated fact record: when, which vault, and the facts it changes.

    ``changes`` maps a fact name to its new value; ``None`` clears the fact. Fields the record
    did not carry are not in it.
    """

    ts: float
    chain: str
    vault: str
    changes: dict[str, Any]

    @property
    def key(self) -> str:
        return vault_key(self.chain, self.vault)


def apply_update(facts: VaultFacts, update: FactUpdate) -> VaultFacts:
    """The merge: carried facts replace, ``None`` clears, everything else stays. Pure."""
    if not update.changes:
        return facts
    return msgspec.structs.replace(facts, **update.changes)


def known_facts(facts: VaultFacts) -> frozenset[str]:
    """Names of the facts currently known (not None)."""
    return frozenset(name for name in FACT_FIELDS if getattr(facts, name) is not None)
