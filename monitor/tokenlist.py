"""The token registry in the Token Lists format, with a per-token peg extension.

A registry file is a Token List (https://tokenlists.org, the JSON schema of the
``@uniswap/token-lists`` package, shipped here as ``schemas/tokenlist.schema.json``) whose
tokens carry these ``extensions``:

============== ==========================================================================
pegType        usd, eur, gbp, ... (fiat ISO code, lowercase), gold, silver, nav, other
pegReference   what one token should be worth, short text ("1 USD", "1 troy oz gold")
sources        optional object: ``priceFeed`` (token/USD Chainlink-style feed),
               ``pegFeed`` (peg/USD feed: EUR/USD, XAU/USD, or the NAV asset's USD feed),
               ``pool`` (a Uniswap v3 pool of the token), ``quoteFeed`` (USD feed of the
               pool's other token), ``navVault`` (ERC-4626 whose share price is the NAV)
lists          the public token lists the entry was found in (provenance)
asset          optional id shared by the same asset on several chains ("usdc"); the
               cross-chain spread stage compares their prices (docs/cross-chain-spread.md)
============== ==========================================================================

:func:`check_tokenlist` validates a file completely (schema, checksummed addresses, the
seven chains, duplicates, the extension) and reports every problem, not just the first;
``depeg-monitor registry check FILE`` prints them with the count per chain.
:func:`tokens_from_tokenlist` turns a valid list into the registry's :class:`TokenInfo`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any, Final

from eth_utils.address import is_checksum_address, to_checksum_address

from .chains import CHAINS
from .registry import ASSET_ID, PEG_TYPES, TokenInfo

#: EIP-155 chain ids of the seven chains (Token Lists identify chains by id).
CHAIN_IDS: Final = {"eth": 1, "arb": 42161, "pol": 137, "opt": 10, "base": 8453, "bsc": 56,
                    "linea": 59144}
CHAIN_BY_ID: Final = {v: k for k, v in CHAIN_IDS.items()}
SOURCE_KEYS: Final = ("priceFeed", "pegFeed", "pool", "quoteFeed", "navVault")
#: Peg types whose peg/USD value comes from a feed (no feed: the peg is unknown, not 1.0).
FEED_PEGS: Final = frozenset(p for p in PEG_TYPES if p not in ("usd", "nav", "other"))


@lru_cache(maxsize=1)
def tokenlist_schema() -> dict[str, Any]:
    text = resources.files("monitor").joinpath("schemas/tokenlist.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


@dataclass
class CheckReport:
    errors: list[str] = field(default_factory=list)
    per_chain: Counter[str] = field(default_factory=Counter)
    tokens: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors


def _schema_errors(doc: Any) -> list[str]:
    from jsonschema import Draft7Validator, FormatChecker

    validator = Draft7Validator(tokenlist_schema(), format_checker=FormatChecker())
    out = []
    for err in sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        out.append(f"schema: {where}: {err.message[:300]}")
    return out


def _address_error(value: Any, what: str) -> str | None:
    if not isinstance(value, str) or len(value) != 42 or not value.startswith("0x"):
        return f"{what} {value!r} is not a 0x + 40 hex digit address"
    try:
        if not is_checksum_address(value):
            return f"{what} {value} is not checksummed (EIP-55: {to_checksum_address(value)})"
    except ValueError:
        return f"{what} {value!r} is not hex"
    return None


def check_tokenlist(doc: Any, *, max_errors: int = 200) -> CheckReport:
    """Every problem of a registry document (see module doc)."""
    report = CheckReport()
    report.errors.extend(_schema_errors(doc))
    tokens = doc.get("tokens") if isinstance(doc, dict) else None
    if not isinstance(tokens, list):
        report.errors.append("no `tokens` array")
        return report
    seen: dict[tuple[int, str], int] = {}
    for i, tok in enumerate(tokens):
        if not isinstance(tok, dict):
            continue
        label = f"tokens[{i}] ({tok.get('symbol', '?')})"
        chain_id = tok.get("chainId")
        chain = CHAIN_BY_ID.get(chain_id) if isinstance(chain_id, int) else None
        if chain is None:
            report.errors.append(f"{label}: chainId {chain_id!r} is not one of the chains "
                                 f"{', '.join(f'{k}={v}' for k, v in CHAIN_IDS.items())}")
        address = tok.get("address")
        problem = _address_error(address, "address")
        if problem:
            report.errors.append(f"{label}: {problem}")
        elif isinstance(chain_id, int):
            key = (chain_id, str(address).lower())
            if key in seen:
                report.errors.append(f"{label}: duplicate of tokens[{seen[key]}] "
                                     f"(chainId {chain_id}, {address})")
            else:
                seen[key] = i
        ext = tok.get("extensions") or {}
        peg = ext.get("pegType") if isinstance(ext, dict) else None
        if peg not in PEG_TYPES:
            report.errors.append(f"{label}: extensions.pegType {peg!r} is not one of "
                                 f"{', '.join(PEG_TYPES)}")
        asset = ext.get("asset") if isinstance(ext, dict) else None
        if asset is not None and not (isinstance(asset, str) and ASSET_ID.fullmatch(asset)):
            report.errors.append(f"{label}: extensions.asset {asset!r} must be lowercase "
                                 "letters, digits, '-' or '_'")
        sources = ext.get("sources") if isinstance(ext, dict) else None
        if sources is not None:
            if not isinstance(sources, dict):
                report.errors.append(f"{label}: extensions.sources must be an object")
            else:
                for key, value in sources.items():
                    if key not in SOURCE_KEYS:
                        report.errors.append(f"{label}: extensions.sources.{key} is not one of "
                                             f"{', '.join(SOURCE_KEYS)}")
                    elif (problem := _address_error(value, f"extensions.sources.{key}")):
                        report.errors.append(f"{label}: {problem}")
        if chain is not None:
            report.per_chain[chain] += 1
        report.tokens += 1
    if len(report.errors) > max_errors:
        extra = len(report.errors) - max_errors
        report.errors = [*report.errors[:max_errors], f"... and {extra} more problems"]
    return report


def tokens_from_tokenlist(doc: dict[str, Any]) -> list[TokenInfo]:
    """Registry entries of a list already checked with :func:`check_tokenlist`."""
    out = []
    for tok in doc["tokens"]:
        ext = tok.get("extensions") or {}
        out.append(TokenInfo(chain=CHAIN_BY_ID[tok["chainId"]], address=tok["address"].lower(),
                             symbol=tok["symbol"], name=tok.get("name", ""),
                             peg_type=ext.get("pegType", "usd"),
                             peg_reference=ext.get("pegReference", ""),
                             asset=ext.get("asset", "")))
    return out


def chains_in_order(report: CheckReport) -> list[tuple[str, int]]:
    return [(c, report.per_chain.get(c, 0)) for c in CHAINS]
