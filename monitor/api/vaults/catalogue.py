"""The value sets of the vault parameters (spec: Vault, E4, E5, Limits), taken from the
vault engine's own definitions so the API accepts exactly what the engine produces."""

from __future__ import annotations

from typing import Final

from ...vaults import catalog, facts, records

#: v2 vault chains (Limits: "Vault chains (v2)"); the V3 chains come after them.
VAULT_CHAINS: Final = facts.VAULT_CHAINS[:6]
#: Tiers in the order of the spec's E4 filter table.
VAULT_TIERS: Final = ("low", "medium", "high", "critical", "unknown")
VERDICTS: Final = records.VERDICTS
PROTOCOLS: Final = facts.PROTOCOL_LABELS
CONTRACT_TYPES: Final = facts.CONTRACT_TYPES
UNDERLYING_RISKS: Final = facts.UNDERLYING_RISKS
#: The 41 tag keys, in the spec's order (riskFlags values).
TAG_KEYS: Final = tuple(t.key for t in catalog.TAGS)

assert VAULT_CHAINS == ("eth", "arb", "base", "opt", "pol", "bsc")
assert set(VAULT_TIERS) == set(records.TIERS) and len(TAG_KEYS) == 41
