"""The 0-100 vault rating: per-category points from the tags, capped, lifted by hard floors.

The formula (docs/vaults.md, "The rating"):

    tag points      = severity_points[severity - 3]           (3, 5, 7, 9, 12, 16, 25, 30)
    category points = min(category_cap, sum of its tags' points [+ base])
                      base: Asset & Market adds underlying_risk_points[underlying_risk]
    sum             = min(100, sum of the 7 category points)
    rating          = round(max(sum, highest floor among the tags that fire))
    rating          = null when fewer than ``min_known_facts`` rated facts are known

Every step is monotone in the tag set (points are >= 0, ``min`` with a constant and ``max``
keep order), so adding a tag never lowers the rating; tests/vaults prove it by property test.
Each category reports its points and the tags and facts behind them, so a reader can say
"78 because redemptions are closed (floor 80) and the owner is an EOA".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from ..timefmt import format_ts
from .catalog import ASSET, CATEGORIES, TAG_BY_KEY
from .config import VaultsConfig
from .facts import VaultFacts
from .records import Contribution, Floor
from .tags import RULE_BY_KEY


@dataclass(frozen=True, slots=True)
class Rating:
    rating: int | None
    contributions: list[Contribution]
    floor: Floor | None
    #: Points per fired tag (before the category cap): the envelope's issue scores.
    tag_points: dict[str, float]
    explanation: str


def tag_points(tag: str, config: VaultsConfig) -> float:
    return config.severity_points[TAG_BY_KEY[tag].severity - 3]


def _round(value: float) -> int:
    return math.floor(value + 0.5)  # half up: 74.5 is 75, as a reader expects


def base_points(underlying_risk: str | None, config: VaultsConfig) -> float:
    if underlying_risk is None:
        return 0.0
    return float(getattr(config.underlying_risk_points, underlying_risk))


class Scorer:
    """The formula with its per-config constants computed once (the engine's hot path)."""

    def __init__(self, config: VaultsConfig) -> None:
        self.config = config
        self.points = {tag: tag_points(tag, config) for tag in TAG_BY_KEY}
        self.category = {tag: info.category for tag, info in TAG_BY_KEY.items()}
        self.floors = config.floors.by_tag()
        self.cap = config.category_cap

    def score(self, tags: Collection[str], underlying_risk: str | None,
              known_facts: int) -> int | None:
        if known_facts < self.config.min_known_facts:
            return None
        per_category: dict[str, float] = {}
        if underlying_risk is not None:
            per_category[ASSET.key] = base_points(underlying_risk, self.config)
        floor = 0.0
        for tag in tags:
            category = self.category[tag]
            per_category[category] = per_category.get(category, 0.0) + self.points[tag]
            floor = max(floor, self.floors.get(tag, 0.0))
        total = min(100.0, sum(min(self.cap, p) for p in per_category.values()))
        return _round(max(total, floor))


@functools.lru_cache(maxsize=16)
def scorer_for(config: VaultsConfig) -> Scorer:
    """One Scorer per config (configs are frozen, so hashable)."""
    return Scorer(config)


def score(tags: Collection[str], underlying_risk: str | None, known_facts: int,
          config: VaultsConfig) -> int | None:
    """The rating alone, from what it depends on (the property tests' entry point)."""
    return scorer_for(config).score(tags, underlying_risk, known_facts)


def _fact_value(facts: VaultFacts, name: str) -> Any:
    value = getattr(facts, name)
    return format_ts(value) if name == "deployed_at" and value is not None else value


def rate(tags: frozenset[str], facts: VaultFacts, known_facts: int, config: VaultsConfig,
         underlying_tier: str | None) -> Rating:
    """The rating with its per-category contributions, floor and one-sentence explanation."""
    scorer = scorer_for(config)
    points = {tag: scorer.points[tag] for tag in tags}
    rating = scorer.score(tags, facts.underlying_risk, known_facts)
    contributions = []
    for category in CATEGORIES:
        in_category = sorted(t for t in tags if TAG_BY_KEY[t].category == category.key)
        evidence: dict[str, Any] = {}
        raw = float(sum(points[t] for t in in_category))
        if category is ASSET and facts.underlying_risk is not None:
            raw += base_points(facts.underlying_risk, config)
            evidence["underlying_risk"] = facts.underlying_risk
        for tag in in_category:
            for name in RULE_BY_KEY[tag].facts:
                evidence[name] = _fact_value(facts, name)
            if tag.startswith("vault-underlying-depeg"):
                evidence["underlying_depeg_tier"] = underlying_tier
        contributions.append(Contribution(
            category=category.key, name=category.name,
            points=float(min(config.category_cap, raw)), tags=in_category,
            facts=dict(sorted(evidence.items())),
        ))
    floors = scorer.floors
    floor = None
    if rating is not None:
        total = min(100.0, sum(c.points for c in contributions))
        best = max(((floors[t], t) for t in tags if t in floors), default=None)
        if best is not None and best[0] > total:
            floor = Floor(tag=best[1], rating=_round(best[0]))
    return Rating(rating, contributions, floor, points,
                  explain(rating, tags, points, floor, known_facts, config))


def explain(rating: int | None, tags: Collection[str], points: dict[str, float],
            floor: Floor | None, known_facts: int, config: VaultsConfig) -> str:
    if rating is None:
        return (f"unrated: {known_facts} of the {config.min_known_facts} facts a rating needs "
                f"are known")
    if not tags:
        return f"{rating}: no risk tag fires"
    ordered = sorted(tags, key=lambda t: (-points[t], t))
    reasons = []
    if floor is not None:
        reasons.append(f"{TAG_BY_KEY[floor.tag].description.lower()} (floor {floor.rating})")
        ordered.remove(floor.tag)
    reasons += [TAG_BY_KEY[t].description.lower() for t in ordered[: 3 - len(reasons)]]
    more = len(tags) - len(reasons)
    tail = f" and {more} more" if more > 0 else ""
    return f"{rating} because " + "; ".join(reasons) + tail
