"""Tier, listing verdict and the attention flag: pure functions of the rating and the tags.

The spec's bands (Resources, Vault): tier critical 75-100, high 50-74, medium 25-49, low 0-24,
unknown when unrated; verdict do_not_list with a blocking tag or a rating >= 75, else
review_required >= 55, caution >= 30 or unrated, safe_to_list < 30.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

CRITICAL_AT: Final = 75
HIGH_AT: Final = 50
MEDIUM_AT: Final = 25

DO_NOT_LIST_AT: Final = 75
REVIEW_AT: Final = 55
CAUTION_AT: Final = 30

#: Verdicts that by themselves put a vault on the attention list.
ATTENTION_VERDICTS: Final = frozenset({"do_not_list", "review_required"})


def tier_for(rating: float | None) -> str:
    if rating is None:
        return "unknown"
    if rating >= CRITICAL_AT:
        return "critical"
    if rating >= HIGH_AT:
        return "high"
    if rating >= MEDIUM_AT:
        return "medium"
    return "low"


def verdict_for(rating: float | None, tags: Collection[str],
                blocking: Collection[str]) -> str:
    """A blocking tag wins over everything, also over an unrated vault."""
    if any(tag in blocking for tag in tags) or (rating is not None and rating >= DO_NOT_LIST_AT):
        return "do_not_list"
    if rating is None:
        return "caution"
    if rating >= REVIEW_AT:
        return "review_required"
    if rating >= CAUTION_AT:
        return "caution"
    return "safe_to_list"


def attention_needed(verdict: str, rise: float, rise_points: float) -> bool:
    """do_not_list or review_required, or the rating rose by ``rise_points`` or more within
    the attention window (``rise`` = rating now minus the lowest rating in the window)."""
    return verdict in ATTENTION_VERDICTS or rise >= rise_points
