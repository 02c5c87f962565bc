"""ABI encoding of contract calls and their results (eth-abi), kept to what adapters need."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from eth_abi.abi import decode, encode
from eth_abi.exceptions import DecodingError
from eth_utils.abi import function_signature_to_4byte_selector
from eth_utils.crypto import keccak

from .rpc import RpcError


class BadReply(ValueError):
    """A contract call returned something that does not decode as the expected types."""


def _split(types: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in types:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return [*out, cur] if cur else out


@lru_cache(maxsize=256)
def _parsed(signature: str) -> tuple[bytes, list[str]]:
    return (function_signature_to_4byte_selector(signature),
            _split(signature[signature.index("(") + 1:-1]))


def call_data(signature: str, *args: Any) -> str:
    """``"balanceOf(address)"`` + args -> ``0x`` call data."""
    sel, types = _parsed(signature)
    return "0x" + (sel + encode(types, list(args))).hex()


def decode_result(types: list[str], result: Any, what: str = "call") -> tuple[Any, ...]:
    """Decode an ``eth_call`` result; a revert or garbage becomes :class:`BadReply`."""
    if isinstance(result, RpcError):
        raise BadReply(f"{what} reverted: {result.message[:200]}")
    if not isinstance(result, str) or not result.startswith("0x"):
        raise BadReply(f"{what}: not hex data: {str(result)[:80]}")
    try:
        return tuple(decode(types, bytes.fromhex(result[2:])))
    except (DecodingError, ValueError) as exc:
        raise BadReply(f"{what}: {exc}") from None


def event_topic(signature: str) -> str:
    return "0x" + keccak(text=signature).hex()


def word_to_address(word: str) -> str:
    """A 32-byte storage word holding an address (EIP-1967 slots) -> lowercase address."""
    return "0x" + word[-40:].lower()
