"""The spec's risk envelope for a vault: counts by severity and one issue per tag.

Severity classes (the spec leaves them open): high = severity 7-10, medium = 4-6; severity 3
tags are counted in ``count`` only.
"""

from __future__ import annotations

from collections.abc import Mapping

from .catalog import CATEGORY_BY_KEY, TAG_BY_KEY
from .records import CategoryEntry, Issue, RiskEnvelope, RiskTag, TagContext

HIGH_SEVERITY = 7
MEDIUM_SEVERITY = 4


def risk_envelope(rating: int | None, tags: list[str], points: Mapping[str, float],
                  detected_at: Mapping[str, str]) -> RiskEnvelope:
    """``tags`` sorted; ``detected_at`` maps each tag to when it started firing."""
    issues = []
    for key in tags:
        info = TAG_BY_KEY[key]
        category = CATEGORY_BY_KEY[info.category]
        tag = RiskTag(key=key, name=info.name, type=info.category, severity=info.severity,
                      description=info.description,
                      context=TagContext(detected_at=detected_at[key]))
        issues.append(Issue(score=points[key], tags=[tag], categories={
            category.key: CategoryEntry(name=category.name, tags={key: True}, key=category.key,
                                        description=f"{category.name} risk")}))
    severities = [TAG_BY_KEY[t].severity for t in tags]
    return RiskEnvelope(
        score=rating,
        count=len(tags),
        medium=sum(1 for s in severities if MEDIUM_SEVERITY <= s < HIGH_SEVERITY),
        high=sum(1 for s in severities if s >= HIGH_SEVERITY),
        overallRisk=rating,
        issues=issues,
    )
