"""The live link to the depeg monitor: each underlying token's tier history.

Built from ``depeg.tier-changes`` records (the spec's event objects). A vault reads its
underlying's tier *as of* an event time, so the answer depends only on the inputs, never on
when a record happened to arrive: replay and the daemon agree.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Final

import msgspec

from ..records import TierChangeEvent
from ..timefmt import parse_ts

#: Tier changes kept per token (oldest dropped first); a token changes tier a few times a day
#: at most, so this covers months.
MAX_HISTORY: Final = 2000

DEPEG_TIERS: Final = frozenset({"ok", "watch", "warning", "critical", "premium"})


@dataclass(frozen=True, slots=True)
class DepegChange:
    ts: float
    chain: str
    token: str
    tier: str

    @property
    def key(self) -> str:
        return f"{self.chain}:{self.token}"


class BadDepegEvent(ValueError):
    pass


_decoder = msgspec.json.Decoder(TierChangeEvent)


def decode_depeg_change(raw: bytes | None) -> DepegChange:
    """A ``depeg.tier-changes`` record (or a line of ``depeg-monitor replay`` output)."""
    if not raw:
        raise BadDepegEvent("empty record")
    try:
        event = _decoder.decode(raw)
        ts = parse_ts(event.timestamp)
    except (msgspec.DecodeError, ValueError, TypeError, OverflowError) as exc:
        raise BadDepegEvent(str(exc)[:200]) from None
    tier = event.data.new_tier
    if tier not in DEPEG_TIERS:
        raise BadDepegEvent(f"unknown tier {tier[:20]!r}")
    return DepegChange(ts=ts, chain=event.data.chain, token=event.data.token_address.lower(),
                       tier=tier)


class DepegTable:
    """Tier history per token key ``chain:token``, sorted by event time."""

    def __init__(self) -> None:
        self._history: dict[str, list[tuple[float, str]]] = {}

    def __len__(self) -> int:
        return len(self._history)

    def add(self, change: DepegChange) -> bool:
        """Record a change; False for a duplicate (at-least-once transport re-delivers)."""
        history = self._history.setdefault(change.key, [])
        entry = (change.ts, change.tier)
        i = bisect.bisect_left(history, entry)
        if i < len(history) and history[i] == entry:
            return False
        history.insert(i, entry)
        if len(history) > MAX_HISTORY:
            del history[: len(history) - MAX_HISTORY]
        return True

    def tier_at(self, key: str, ts: float) -> str | None:
        """The tier in force at ``ts``: the newest change at or before it (None: none seen)."""
        history = self._history.get(key)
        if not history:
            return None
        i = bisect.bisect_right(history, (ts, "\uffff"))
        return history[i - 1][1] if i else None

    def between(self, key: str, after: float, until: float) -> list[tuple[float, str]]:
        """Changes with ``after < ts <= until``, oldest first."""
        history = self._history.get(key)
        if not history:
            return []
        lo = bisect.bisect_right(history, (after, "\uffff"))
        hi = bisect.bisect_right(history, (until, "\uffff"))
        return history[lo:hi]
