"""Vault facts: one observation of one vault, validated in exactly one place.

The wire format is DESIGN.md "Vault facts", a fixed contract: one JSON object per Kafka record
on ``vaults.facts`` (key ``"{chain}:{vault}"``) or per line of a fact file. ``ts``, ``chain`` and
``vault`` are required; every other field is optional. A record is a *partial update*: it
changes only the facts it carries, ``null`` clears a fact, an absent field leaves it as it was.
Unknown fields are ignored, so producers may add their own.

The daemon and ``vaults replay`` both go through :func:`decode_facts`, so a record the daemon
dead-letters is refused by replay for the same reason. The merge (:func:`apply_update`) is pure.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

import msgspec
from msgspec import UNSET, UnsetType

from ..timefmt import format_ts, parse_ts

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


# --- value validation, one small checker per kind of fact ------------------------------------


def _number(name: str, value: Number) -> float:
    if isinstance(value, bool):
        raise BadFacts("bad_value", f"{name} must be a number, not a boolean")
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise BadFacts("bad_value", f"{name} is not a number: {value[:40]!r}") from None
    else:
        number = float(value)
    if not math.isfinite(number):
        raise BadFacts("bad_value", f"{name} is not finite: {str(value)[:40]!r}")
    return number


def _check_range(name: str, number: float, low: float | None, high: float | None) -> float:
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = f"[{'-inf' if low is None else low:g}, {'inf' if high is None else high:g}]"
        raise BadFacts("bad_value", f"{name} {number:g} is outside {bounds}")
    return number


def _text(limit: int) -> Any:
    def check(name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise BadFacts("bad_value", f"{name} must be a string")
        return value.strip()[:limit]

    return check


def _choice(choices: tuple[str, ...]) -> Any:
    def check(name: str, value: Any) -> str:
        if value not in choices:
            raise BadFacts("bad_value", f"{name} {str(value)[:40]!r} is not one of {choices}")
        return str(value)

    return check


def _ranged(low: float | None, high: float | None) -> Any:
    def check(name: str, value: Any) -> float:
        return _check_range(name, _number(name, value), low, high)

    return check


def _count(name: str, value: Any) -> int:
    number = _check_range(name, _number(name, value), 0, None)
    if number != int(number):
        raise BadFacts("bad_value", f"{name} must be a whole number: {number:g}")
    return int(number)


def _time(name: str, value: Any) -> float:
    try:
        return parse_ts(value)
    except (ValueError, TypeError, OverflowError) as exc:
        detail = f"{name}: unparseable time {str(value)[:40]!r}: {exc}"
        raise BadFacts("bad_value", detail) from None


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise BadFacts("bad_value", f"{name} must be true or false")
    return value


def _objects(name: str, value: Any) -> tuple[dict[str, Any], ...]:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise BadFacts("bad_value", f"{name} must be a list of objects")
    return tuple(value)


def _object(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadFacts("bad_value", f"{name} must be an object")
    return value


def _composition(name: str, value: Any) -> tuple[CompositionEntry, ...]:
    entries = []
    for index, item in enumerate(_objects(name, value)):
        symbol = item.get("symbol")
        if not isinstance(symbol, str) or not symbol.strip():
            raise BadFacts("bad_value", f"{name}[{index}].symbol must be a non-empty string")
        address = item.get("address")
        if address is not None and not isinstance(address, str):
            raise BadFacts("bad_value", f"{name}[{index}].address must be a string")
        share = item.get("share_pct")
        share_pct = None if share is None else _ranged(0, 100)(f"{name}[{index}].share_pct", share)
        entries.append(CompositionEntry(
            symbol=symbol.strip()[:32],
            address=address.strip().lower() if address else None,
            share_pct=share_pct,
        ))
    return tuple(entries)


_NON_NEGATIVE = _ranged(0, None)
_FRACTION = _ranged(0, 1)
#: A return or growth rate as a fraction: a loss is at most everything (-1).
_RETURN = _ranged(-1, None)

#: Every fact and how its value is checked and normalised (DESIGN.md "Vault facts" types).
#: ``underlying_address`` is checked separately: its format depends on the chain.
CHECKS: Final[dict[str, Any]] = {
    "name": _text(128),
    "symbol": _text(32),
    "protocol": _text(32),
    "contract_type": _choice(CONTRACT_TYPES),
    "underlying_symbol": _text(32),
    "underlying_risk": _choice(UNDERLYING_RISKS),
    "tvl_usd": _NON_NEGATIVE,
    "apy_pct": _ranged(-100, None),
    "looping_rate": _FRACTION,
    "upgradeable": _flag,
    "subvault": _flag,
    "emergency_shutdown": _flag,
    "owner_kind": _choice(OWNER_KINDS),
    "pausable": _flag,
    "pending_admin_change": _flag,
    "timelock_seconds": _NON_NEGATIVE,
    "redemption_open": _flag,
    "deposit_open": _flag,
    "lockup_seconds": _NON_NEGATIVE,
    "withdrawal_delay_seconds": _NON_NEGATIVE,
    "utilization": _FRACTION,
    "bad_debt_usd": _NON_NEGATIVE,
    "market_liquidity_usd": _NON_NEGATIVE,
    "source_verified": _flag,
    "audit_count": _count,
    "exploit_history": _flag,
    "deployed_at": _time,
    "share_price": _NON_NEGATIVE,
    "expected_share_price": _ranged(0, None),
    "oracle_warning": _flag,
    "synthetic_asset": _flag,
    "lst_redemption_lag_days": _NON_NEGATIVE,
    "minted_24h": _NON_NEGATIVE,
    "total_supply": _NON_NEGATIVE,
    "event_count": _count,
    "lifetime_return": _RETURN,
    "cagr_1m": _RETURN,
    "cagr_3m": _RETURN,
    "net_flow_usd_30d": _ranged(None, None),
    "fee_bps": _NON_NEGATIVE,
    "peer_fee_bps": _NON_NEGATIVE,
    "protocol_eol": _flag,
    "retired": _flag,
    "protocol_high_risk": _flag,
    "whitelisted": _flag,
    "strategy_loss_usd": _NON_NEGATIVE,
    "composition": _composition,
    "looping_markets": _objects,
    "lst_collateral_markets": _objects,
    "code_findings": _objects,
    "lending_market": _object,
}

_decoder = msgspec.json.Decoder(FactsMessage)


def make_update(message: FactsMessage) -> FactUpdate:
    """Validate a decoded wire message into a :class:`FactUpdate` or raise :class:`BadFacts`."""
    try:
        ts = parse_ts(message.ts)
    except (ValueError, TypeError, OverflowError) as exc:
        raise BadFacts("bad_ts", f"unparseable time {str(message.ts)[:40]!r}: {exc}") from None
    chain = message.chain.strip().lower()
    if chain not in VAULT_CHAINS:
        raise BadFacts("unknown_chain", f"unknown chain {chain[:20]!r}")
    vault = normalize_vault_address(chain, message.vault)
    if vault is None:
        raise BadFacts("bad_address", f"malformed vault address {message.vault[:60]!r}")
    changes: dict[str, Any] = {}
    for name in FACT_FIELDS:
        value = getattr(message, name)
        if value is UNSET:
            continue
        if value is None:
            changes[name] = None
        elif name == "underlying_address":
            address = normalize_vault_address(chain, value)
            if address is None:
                raise BadFacts("bad_address", f"malformed underlying_address {value[:60]!r}")
            changes[name] = address
        else:
            changes[name] = CHECKS[name](name, value)
    return FactUpdate(ts=ts, chain=chain, vault=vault, changes=changes)


def decode_facts(value: bytes | None) -> FactUpdate:
    """A Kafka record value or a fact-file line -> FactUpdate, or :class:`BadFacts`."""
    if value is None or not value.strip():
        raise BadFacts("empty", "record has no value")
    if len(value) > MAX_FACT_BYTES:
        raise BadFacts("too_large", f"record is {len(value)} bytes, limit {MAX_FACT_BYTES}")
    try:
        message = _decoder.decode(value)
    except msgspec.DecodeError as exc:
        text = str(exc).lower()
        reason = "bad_json" if "malformed" in text or "truncated" in text else "bad_schema"
        raise BadFacts(reason, str(exc)[:200]) from None
    return make_update(message)


def apply_update(facts: VaultFacts, update: FactUpdate) -> VaultFacts:
    """The merge: carried facts replace, ``None`` clears, everything else stays. Pure."""
    if not update.changes:
        return facts
    return msgspec.structs.replace(facts, **update.changes)


def known_facts(facts: VaultFacts) -> frozenset[str]:
    """Names of the facts currently known (not None)."""
    return frozenset(name for name in FACT_FIELDS if getattr(facts, name) is not None)


def _wire_value(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name == "deployed_at":
        return format_ts(value)
    if name == "composition":
        return [msgspec.to_builtins(entry) for entry in value]
    if isinstance(value, tuple):
        return list(value)
    return value


def encode_update(update: FactUpdate) -> bytes:
    """A FactUpdate -> its wire JSON (what producers publish); fields in contract order."""
    body: dict[str, Any] = {
        "ts": format_ts(update.ts), "chain": update.chain, "vault": update.vault,
    }
    for name in FACT_FIELDS:
        if name in update.changes:
            body[name] = _wire_value(name, update.changes[name])
    return msgspec.json.encode(body)
