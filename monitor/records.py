"""What the monitor publishes: tier-change events and rating snapshots.

These are public contracts (downstream teams build on the topics, integrators verify the
webhook signature over the event's exact bytes), so their field order and encoding are
fixed here and nowhere else.
"""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import TYPE_CHECKING, Final

import msgspec

if TYPE_CHECKING:
    from hashlib import sha1
else:
    try:  # CPython's own SHA-1, the digest uuid.uuid5 takes from hashlib: importing hashlib
        from _sha1 import sha1  # loads OpenSSL, ~3 ms of every replay's start-up
    except ImportError:
        from hashlib import sha1

EVENT_TYPE: Final = "DEPEG_TIER_CHANGE"

#: Namespace for deterministic event ids: a replay or a restart re-emits the same id.
EVENT_NAMESPACE: Final = uuid.UUID("6f1c2f4e-5d0a-4c3b-9a57-2d1f0b7c8e41")
_NAMESPACE_BYTES: Final = EVENT_NAMESPACE.bytes


class Tier(StrEnum):
    OK = "ok"
    WATCH = "watch"
    WARNING = "warning"
    CRITICAL = "critical"
    PREMIUM = "premium"


#: Severity order for escalation; premium sits beside ok (above peg is not a loss of peg).
SEVERITY: Final[dict[Tier, int]] = {
    Tier.OK: 0, Tier.PREMIUM: 0, Tier.WATCH: 1, Tier.WARNING: 2, Tier.CRITICAL: 3,
}


class TierChangeData(msgspec.Struct, frozen=True):
    token_address: str
    chain: str
    symbol: str
    old_tier: str
    new_tier: str
    risk_score: float
    deviation_pct: float
    price_usd: str
    peg_usd: str


class TierChangeEvent(msgspec.Struct, frozen=True):
    """The spec's event object, field for field, in the spec's order."""

    event_type: str
    event_id: str
    timestamp: str
    data: TierChangeData


def event_id(chain: str, token: str, evaluated_at: str, old_tier: str, new_tier: str) -> str:
    """UUIDv5 over what identifies a transition, so duplicates share an id: what
    ``uuid.uuid5(EVENT_NAMESPACE, name)`` returns, with the SHA-1 imported above
    (tests/test_records_ids.py compares the two)."""
    name = f"{chain}:{token}|{evaluated_at}|{old_tier}|{new_tier}"
    digest = sha1(_NAMESPACE_BYTES + name.encode("utf-8")).digest()
    return str(uuid.UUID(bytes=digest[:16], version=5))


class SignalValue(msgspec.Struct, frozen=True, gc=False):
    """One signal of a rating: its raw value, its 0-1 score and what it added.

    ``gc=False``: several are made per snapshot and hold only scalars, so they can never
    be part of a reference cycle; untracked, they skip the collector's bookkeeping."""

    name: str
    value: float | None
    score: float
    weight: float
    contribution: float
    observed: bool


class RatingSnapshot(msgspec.Struct, frozen=True, gc=False):
    """One token's rating at one refresh (``depeg.ratings``, keyed ``chain:token``).

    ``gc=False``: one per token per snapshot period, freed once encoded; nothing it holds
    (its signal list and metrics dict) ever refers back to it, so it is never part of a
    cycle (the list and dict stay tracked on their own)."""

    chain: str
    token_address: str
    symbol: str
    timestamp: str
    rating: float
    tier: str
    band_tier: str
    price_usd: str | None
    peg_usd: str | None
    deviation_pct: float | None
    staleness_seconds: float
    signals: list[SignalValue]
    metrics: dict[str, float | None]
    schema_version: int = 1


#: The encoder behind :func:`encode`; a hot path may call its ``encode`` directly (no
#: Python frame), with the same bytes.
ENCODER = msgspec.json.Encoder()


def encode(record: TierChangeEvent | RatingSnapshot) -> bytes:
    """Compact JSON, non-ASCII unescaped: the exact bytes that are signed and sent."""
    return ENCODER.encode(record)


def decode_event(raw: bytes) -> TierChangeEvent:
    return msgspec.json.decode(raw, type=TierChangeEvent)


def decode_snapshot(raw: bytes) -> RatingSnapshot:
    return msgspec.json.decode(raw, type=RatingSnapshot)
