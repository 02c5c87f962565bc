"""Vault facts: one observation of one vault, validated in exactly one place.

The wire format is DESIGN.md "Vault facts", a fixed contract: one JSON object per Kafka record
on ``vaults.facts`` (key ``"{chain}:{vault}"``) or per line of a fact file. ``ts``, ``chain`` and
``vault`` are required; every other field is optional. A record is a *partial update*: it
changes only the facts it carries, ``null`` clears a fact, an absent field leaves it as it was.
Unknown fields are ignored, so producers may add their own.

The daemon and ``vaults replay`` both go through :func:`decode_facts`, so a record the daemon
dead-letters is refused by replay for the same reason. The merge (:func:`apply_update`) is pure.

One idea per module: ``contract`` (the wire fields, known values, chains, addresses and
refusal reasons), ``state`` (the merged facts, one update, the merge), ``checks`` (each
fact's value check) and ``codec`` (bytes to an update and back). Import from here.
"""

from __future__ import annotations

from .checks import CHECKS
from .codec import decode_facts, encode_update, make_update
from .contract import (
    BAD_FACT_REASONS,
    CONTRACT_TYPES,
    MAX_FACT_BYTES,
    NON_EVM_CHAINS,
    OWNER_KINDS,
    PROTOCOL_LABELS,
    UNDERLYING_RISKS,
    VAULT_CHAINS,
    BadFacts,
    FactsMessage,
    FactValue,
    Number,
    normalize_vault_address,
    vault_key,
)
from .state import FACT_FIELDS, CompositionEntry, FactUpdate, VaultFacts, apply_update, known_facts

__all__ = [
    "BAD_FACT_REASONS",
    "CHECKS",
    "CONTRACT_TYPES",
    "FACT_FIELDS",
    "MAX_FACT_BYTES",
    "NON_EVM_CHAINS",
    "OWNER_KINDS",
    "PROTOCOL_LABELS",
    "UNDERLYING_RISKS",
    "VAULT_CHAINS",
    "BadFacts",
    "CompositionEntry",
    "FactUpdate",
    "FactValue",
    "FactsMessage",
    "Number",
    "VaultFacts",
    "apply_update",
    "decode_facts",
    "encode_update",
    "known_facts",
    "make_update",
    "normalize_vault_address",
    "vault_key",
]
