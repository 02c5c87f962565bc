"""Value validation, one small checker per kind of fact: :data:`CHECKS` maps each fact to
the function that checks and normalises its value or raises :class:`BadFacts` ``bad_value``.
"""

from __future__ import annotations

import math
from typing import Any, Final

from ...timefmt import parse_ts
from .contract import CONTRACT_TYPES, OWNER_KINDS, UNDERLYING_RISKS, BadFacts, Number
from .state import CompositionEntry


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
