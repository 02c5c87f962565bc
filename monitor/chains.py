"""The chains pegged tokens are tracked on, and how a token is identified.

A token is always ``chain`` + lowercase contract address, never a symbol: symbols collide
(several "USDC"s exist per chain) while addresses do not.
"""

from __future__ import annotations

import re

#: The seven EVM chains of the pegged-token interface, in the spec's order.
CHAINS: tuple[str, ...] = ("eth", "arb", "pol", "opt", "base", "bsc", "linea")

_ADDRESS = re.compile(r"^0x[0-9a-f]{40}$")


def is_chain(value: str) -> bool:
    return value in CHAINS


def normalize_address(value: str) -> str | None:
    """Lowercase an EVM address, or None when it is not 0x + 40 hex digits."""
    lowered = value.strip().lower()
    return lowered if _ADDRESS.match(lowered) else None


def token_key(chain: str, address: str) -> str:
    """The Kafka key and the engine's key: ``"{chain}:{address}"``."""
    return f"{chain}:{address}"


def split_key(key: str) -> tuple[str, str]:
    chain, _, address = key.partition(":")
    return chain, address
