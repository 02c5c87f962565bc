"""Grading schemes: a 0-100 risk score (higher = riskier) to a letter grade and stars.

``v2`` (the default) is the standard 11-band scale; ``v1`` is the frozen legacy 5-letter
scale. Each band is ``(grade, upper edge, stars)``: a score belongs to the first band whose
upper edge is >= the score.

Fractional scores: the score is first rounded to 2 decimals (half away from zero, the value
the response shows), then graded. Bands are closed on their upper edge and never rounded
toward the better grade: 5.0 is A+, 5.01 is A, 88.0 is D, 88.01 is F. A score between two
integer edges (5 < s < 6) therefore takes the worse band, which is the conservative reading
of the published integer bands (A+ 0-5, A 6-12, ...).

Hard caps (:func:`cap_grade`): a grade is never better than a ceiling (a vault with its
redemptions blocked never grades above D).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

#: Grading schemes this build supports (E8/E3 ``grading_scheme``).
SUPPORTED_SCHEMES = ("v1", "v2")
DEFAULT_SCHEME = "v2"


@dataclass(frozen=True)
class Band:
    grade: str
    low: int  # the published lower edge (documentation; lookups use ``high``)
    high: int
    stars: int


SCHEMES: dict[str, tuple[Band, ...]] = {
    # The 11-band scale (research/vault-anchors.md): A+ best, F worst.
    "v2": (
        Band("A+", 0, 5, 5), Band("A", 6, 12, 5), Band("A-", 13, 20, 4), Band("B+", 21, 28, 4),
        Band("B", 29, 37, 3), Band("B-", 38, 46, 3), Band("C+", 47, 56, 2), Band("C", 57, 66, 2),
        Band("C-", 67, 77, 2), Band("D", 78, 88, 1), Band("F", 89, 100, 1),
    ),
    # Legacy: five letters laid over the vault tiers (low 0-24, medium 25-49, high 50-74,
    # critical 75-100): A low, B low/medium, C medium/high, D high, F critical. Frozen.
    "v1": (
        Band("A", 0, 19, 5), Band("B", 20, 34, 4), Band("C", 35, 59, 3), Band("D", 60, 74, 2),
        Band("F", 75, 100, 1),
    ),
}


def round_score(score: float) -> float:
    """The score as shown: 2 decimals, half away from zero (Decimal, not binary float)."""
    return float(Decimal(repr(score)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def band(score: float, scheme: str = DEFAULT_SCHEME) -> Band:
    """The band of a 0-100 risk score (rounded to 2 decimals first)."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown grading scheme {scheme!r}")
    value = round_score(score)
    if not 0.0 <= value <= 100.0:
        raise ValueError(f"score {score} outside 0-100")
    for b in SCHEMES[scheme]:
        if value <= b.high:
            return b
    raise AssertionError("the last band ends at 100")


def grade_index(grade: str, scheme: str) -> int:
    """Position of ``grade`` in ``scheme`` (0 = best)."""
    return [b.grade for b in SCHEMES[scheme]].index(grade)


def cap_grade(b: Band, max_grade: str, scheme: str) -> Band:
    """``b``, or the ceiling band when ``b`` is better than ``max_grade``."""
    bands = SCHEMES[scheme]
    ceiling = grade_index(max_grade, scheme)
    return bands[ceiling] if grade_index(b.grade, scheme) < ceiling else b
