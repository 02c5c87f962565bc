"""The token registry: which pegged tokens are tracked, and what each one is pegged to.

A TOML file (``registry.path``) lists one ``[[token]]`` table per token::

    [[token]]
    chain = "eth"
    address = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
    symbol = "USDC"
    name = "USD Coin"
    peg_type = "usd"            # usd, eur, gbp, ... (fiat), gold, silver, nav, other
    peg_reference = "USD"       # free text: what one token should be worth
    market_cap_usd = 32000000000
    asset = "usdc"              # optional: the same asset on other chains shares this id

Tokens sharing an ``asset`` id (lowercase letters, digits, ``-``/``_``) are one asset on
several chains: the cross-chain spread stage compares their prices (docs/cross-chain-spread.md).

The registry only describes tokens: rating never depends on it (the tick carries the peg),
so a token seen in ticks but missing here is still rated and listed, marked
``registered: false``. Tags (the ``tags`` filter of ``GET /rwa``) derive from the peg type.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import msgspec

from .chains import CHAINS, normalize_address

#: Fiat currencies a plain stablecoin may be pegged to.
FIAT_PEGS: Final = frozenset({
    "usd", "eur", "gbp", "chf", "jpy", "cny", "sgd", "aud", "cad", "try", "brl", "mxn",
    "krw", "idr", "php", "zar", "nzd", "hkd", "inr", "ngn",
})
COMMODITY_PEGS: Final = frozenset({"gold", "silver"})
PEG_TYPES: Final = (*sorted(FIAT_PEGS), "gold", "silver", "nav", "other")

#: Values of the ``tags`` filter, in documentation order. Meaning:
#: standard - a plain fiat-backed stablecoin pegged 1:1 to USD;
#: stablecoin - pegged 1:1 to any fiat currency; non-usd - a fiat peg other than USD;
#: rwa - a real-world-asset token (commodity or NAV-priced); gold/commodity - backed by a
#: commodity (gold also tagged gold); yield - priced at a moving NAV (yield-bearing);
#: unregistered - seen in ticks but missing from the registry.
TAGS: Final = ("standard", "stablecoin", "non-usd", "rwa", "commodity", "gold", "yield",
               "unregistered")


def tags_for(peg_type: str | None) -> tuple[str, ...]:
    if peg_type is None:
        return ("unregistered",)
    if peg_type == "usd":
        return ("standard", "stablecoin")
    if peg_type in FIAT_PEGS:
        return ("stablecoin", "non-usd")
    if peg_type == "gold":
        return ("rwa", "commodity", "gold")
    if peg_type in COMMODITY_PEGS:
        return ("rwa", "commodity")
    if peg_type == "nav":
        return ("rwa", "yield")
    return ("rwa",)


#: What an ``asset`` id may look like (also the Token List ``extensions.asset``).
ASSET_ID: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


class RegistryError(ValueError):
    pass


class TokenInfo(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    chain: str
    address: str
    symbol: str
    name: str = ""
    peg_type: str = "usd"
    peg_reference: str = ""
    market_cap_usd: float | None = None
    #: The asset this token is one chain's instance of ("" = none).
    asset: str = ""

    @property
    def tags(self) -> tuple[str, ...]:
        return tags_for(self.peg_type)


class _File(msgspec.Struct, forbid_unknown_fields=True):
    token: list[TokenInfo] = []


def parse_registry(text: str, source: str = "registry") -> list[TokenInfo]:
    """Validate every entry; a bad one stops start-up with its index and the reason."""
    import tomllib  # here: a replay without a registry file never parses TOML

    try:
        raw = tomllib.loads(text)
        parsed = msgspec.convert(raw, _File)
    except (tomllib.TOMLDecodeError, msgspec.ValidationError) as exc:
        raise RegistryError(f"{source}: {exc}") from None
    tokens: list[TokenInfo] = []
    seen: set[tuple[str, str]] = set()
    for i, t in enumerate(parsed.token):
        where = f"{source}: token[{i}] ({t.symbol})"
        address = normalize_address(t.address)
        if address is None:
            raise RegistryError(f"{where}: address {t.address!r} is not 0x + 40 hex digits")
        if t.chain not in CHAINS:
            raise RegistryError(f"{where}: chain {t.chain!r} not one of {', '.join(CHAINS)}")
        if t.peg_type not in PEG_TYPES:
            raise RegistryError(f"{where}: peg_type {t.peg_type!r} not one of "
                                f"{', '.join(PEG_TYPES)}")
        if t.market_cap_usd is not None and not t.market_cap_usd >= 0:
            raise RegistryError(f"{where}: market_cap_usd must be >= 0")
        if t.asset and not ASSET_ID.fullmatch(t.asset):
            raise RegistryError(f"{where}: asset {t.asset!r} must be lowercase letters, "
                                f"digits, '-' or '_'")
        if (t.chain, address) in seen:
            raise RegistryError(f"{where}: {t.chain}:{address} listed twice")
        seen.add((t.chain, address))
        tokens.append(msgspec.structs.replace(t, address=address))
    return tokens


def load_registry(path: str | Path | None) -> list[TokenInfo]:
    """An empty path means no registry (every token is then ``registered: false``).

    A ``.json`` file is a Token List with the peg extension (monitor/tokenlist.py), any
    other file the TOML format above.
    """
    if not path:
        return []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RegistryError(f"cannot read token registry {path}: {exc}") from None
    if str(path).endswith(".json"):
        return _load_tokenlist(text, str(path))
    return parse_registry(text, str(path))


def _load_tokenlist(text: str, source: str) -> list[TokenInfo]:
    import json

    from .tokenlist import check_tokenlist, tokens_from_tokenlist

    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RegistryError(f"{source}: not JSON: {exc}") from None
    report = check_tokenlist(doc, max_errors=5)
    if not report.ok:
        raise RegistryError(f"{source}: " + "; ".join(report.errors))
    return tokens_from_tokenlist(doc)
