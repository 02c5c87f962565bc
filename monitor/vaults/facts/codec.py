"""Bytes to :class:`FactUpdate` and back: the one decoder the daemon and ``vaults replay``
share (so both refuse a record for the same reason), and the encoder producers publish with.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET

from ...timefmt import format_ts, parse_ts
from .checks import CHECKS
from .contract import MAX_FACT_BYTES, VAULT_CHAINS, BadFacts, FactsMessage, normalize_vault_address
from .state import FACT_FIELDS, FactUpdate

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
