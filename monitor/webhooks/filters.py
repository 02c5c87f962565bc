"""Subscription filters (E10) and how an event is matched against them.

All given filters must match (AND); an absent filter matches everything. ``tiers`` is
checked against the event's *new* tier, ``tokens`` case-insensitively, and
``minDeviationPct`` against the size of the deviation, ``abs(deviation_pct)``: a token
10 % above peg is as far from it as one 10 % below.
"""

from __future__ import annotations

import msgspec

from ..records import TierChangeData


class Filters(msgspec.Struct, frozen=True, omit_defaults=True,
              rename={"min_deviation_pct": "minDeviationPct"}):
    tiers: list[str] | None = None
    chains: list[str] | None = None
    #: Stored lowercased (see :func:`normalized`).
    tokens: list[str] | None = None
    min_deviation_pct: float | None = None

    def normalized(self) -> Filters:
        tokens = None if self.tokens is None else sorted({t.lower() for t in self.tokens})
        return msgspec.structs.replace(self, tokens=tokens)

    def matches(self, data: TierChangeData) -> bool:
        if self.tiers is not None and data.new_tier not in self.tiers:
            return False
        if self.chains is not None and data.chain not in self.chains:
            return False
        if self.tokens is not None and data.token_address.lower() not in {
            t.lower() for t in self.tokens
        }:
            return False
        return not (
            self.min_deviation_pct is not None
            and abs(data.deviation_pct) < self.min_deviation_pct
        )


def encode_filters(filters: Filters) -> str:
    return msgspec.json.encode(filters).decode()


def decode_filters(text: str) -> Filters:
    return msgspec.json.decode(text, type=Filters)
