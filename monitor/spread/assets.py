"""Which token keys are one asset on several chains, from the registry's ``asset`` ids."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..registry import TokenInfo


@dataclass(frozen=True, slots=True)
class AssetMap:
    """``chain:token`` -> asset id, only for assets listed on two or more chains (a spread
    needs two prices; a single-chain asset gets no observations and never waits for any)."""

    asset_of: Mapping[str, str]

    @property
    def keys(self) -> frozenset[str]:
        """The token keys whose rating waits for the spread stage (the engine's gate)."""
        return frozenset(self.asset_of)

    def __bool__(self) -> bool:
        return bool(self.asset_of)


def asset_map(tokens: Iterable[TokenInfo]) -> AssetMap:
    chains: dict[str, set[str]] = defaultdict(set)
    members: dict[str, list[str]] = defaultdict(list)
    for t in tokens:
        if t.asset:
            chains[t.asset].add(t.chain)
            members[t.asset].append(f"{t.chain}:{t.address}")
    return AssetMap({key: asset for asset, keys in sorted(members.items())
                     if len(chains[asset]) >= 2 for key in keys})
