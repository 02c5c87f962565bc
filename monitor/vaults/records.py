"""What the vault engine publishes on ``vaults.ratings``: one record per change of a vault.

A public contract like ``depeg.ratings`` (downstream teams and the store writer build on it),
so the field order and encoding are fixed here and nowhere else; the JSON Schema is
``monitor/schemas/vault-rating.json``. A record is written whenever a vault's rating, tier,
verdict, tag set or attention flag changes, keyed ``"{chain}:{vault}"``.

``risk`` is the spec's risk envelope (score, count, medium, high, overallRisk, issues: one
issue per tag); ``contributions`` says where every point of the rating came from, per
category, so a reader can say "78 because redemptions are closed and the owner is an EOA".
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

SCHEMA_VERSION: Final = 1

#: The spec's vault tiers and listing verdicts (Resources, Vault).
TIERS: Final = ("critical", "high", "medium", "low", "unknown")
VERDICTS: Final = ("do_not_list", "review_required", "caution", "safe_to_list")


class TagContext(msgspec.Struct, frozen=True):
    #: When the tag first fired in its current run (event time, ISO 8601 UTC).
    detected_at: str


class RiskTag(msgspec.Struct, frozen=True):
    """The spec's Tag: key, display name, category key as ``type``, severity 3-10."""

    key: str
    name: str
    type: str
    severity: int
    description: str
    context: TagContext


class CategoryEntry(msgspec.Struct, frozen=True):
    name: str
    tags: dict[str, bool]
    key: str
    description: str


class Issue(msgspec.Struct, frozen=True):
    """One issue per tag: ``score`` = the points the tag adds before category caps."""

    score: float
    tags: list[RiskTag]
    categories: dict[str, CategoryEntry]


class RiskEnvelope(msgspec.Struct, frozen=True):
    """The spec's ``risk`` field. ``score``/``overallRisk`` are null when the vault is unrated
    (too few facts): unknown is never shown as safe."""

    score: int | None
    count: int
    medium: int
    high: int
    overallRisk: int | None
    issues: list[Issue]


class Contribution(msgspec.Struct, frozen=True):
    """What one category added to the rating, and why.

    ``points`` is after the category cap; ``tags`` the tags that fired in it (sorted);
    ``facts`` the facts those tags (and the category's base) were read from, with their values.
    """

    category: str
    name: str
    points: float
    tags: list[str]
    facts: dict[str, Any]


class Floor(msgspec.Struct, frozen=True):
    """A hard floor that lifted the rating: the binary danger and the minimum it imposes."""

    tag: str
    rating: int


class VaultRating(msgspec.Struct, frozen=True):
    """One vault's assessment after a change (``vaults.ratings``, keyed ``chain:vault``)."""

    ts: str
    chain: str
    vault: str
    rating: int | None
    tier: str
    verdict: str
    tags: list[str]
    attention_needed: bool
    risk: RiskEnvelope
    contributions: list[Contribution]
    #: The floor that set the rating, when one did (otherwise the sum of contributions).
    floor: Floor | None
    #: One sentence: "78 because …" (or why the vault is unrated).
    explanation: str
    #: Facts the rating could use that are known; a rating needs ``vaults.min_known_facts``.
    known_facts: int
    #: The underlying token's depeg tier as last seen on depeg.tier-changes (null: none seen).
    underlying_depeg_tier: str | None
    schema_version: int = SCHEMA_VERSION

    @property
    def key(self) -> str:
        return f"{self.chain}:{self.vault}"


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(VaultRating)


def encode_rating(record: VaultRating) -> bytes:
    """Compact JSON, fields in declaration order: the exact bytes on the topic and in replay."""
    return _encoder.encode(record)


def decode_rating(raw: bytes) -> VaultRating:
    return _decoder.decode(raw)
