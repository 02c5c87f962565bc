"""Score one entity against a framework: criteria -> categories -> composite -> grade. Pure.

Inputs are what the rating pipeline already knows about the entity: the risk tags present,
the facts observed (name -> value; a fact absent or ``None`` was not observed) and the
upstream v2 risk score. Rules (docs/v3.md):

* criterion: ``fail`` when one of its fail tags is present, else ``warn`` when one of its
  warn tags is, else ``pass`` when one of its facts is known, else ``not_evaluated``;
  planned criteria are always ``not_evaluated``;
* category score: the mean of the points of its evaluated criteria (pass 0, warn 50,
  fail 100 in v1); ``None`` when none was evaluated;
* framework composite: the weighted mean of the category scores that exist, over the
  weights of those categories (a weight-0 category never counts);
* composite score = max(framework composite, upstream risk); ``clamped_by_upstream`` is true
  exactly when the upstream value is strictly greater (or the framework has no score), i.e.
  when the upstream value, not the framework, set the result;
* grade and stars from the grading scheme, then the framework's caps (a blocking
  redemption state never grades above D).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from typing import Any, Literal

from .grading import Band, band, cap_grade, round_score
from .model import Criterion, Framework

Outcome = Literal["pass", "warn", "fail", "not_evaluated"]


@dataclass(frozen=True)
class CriterionResult:
    key: str
    name: str
    status: str  # live | planned
    outcome: Outcome
    tags: list[str]  # the present tags that decided a warn/fail
    facts: dict[str, Any]  # the observed facts that decided it


@dataclass(frozen=True)
class CategoryResult:
    key: str
    name: str
    weight: float
    score: float | None
    criteria: list[CriterionResult]


@dataclass(frozen=True)
class Composite:
    framework_score: float | None
    upstream_risk: float | None
    score: float | None
    clamped_by_upstream: bool
    grading_scheme: str
    grade: str | None
    stars: int | None
    caps_applied: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Result:
    framework_version: str
    composite: Composite
    categories: list[CategoryResult]

    def coverage(self) -> dict[str, int]:
        crits = [c for cat in self.categories for c in cat.criteria]
        live = sum(c.status == "live" for c in crits)
        evaluated = sum(c.outcome != "not_evaluated" for c in crits)
        return {"criteria_total": len(crits), "criteria_live": live,
                "criteria_planned": len(crits) - live, "criteria_evaluated": evaluated}


def _known(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def evaluate_criterion(crit: Criterion, tags: Set[str],
                       facts: Mapping[str, Any]) -> CriterionResult:
    observed = {f: facts[f] for f in crit.facts if _known(facts.get(f))}
    if crit.status == "planned":
        return CriterionResult(crit.key, crit.name, crit.status, "not_evaluated", [], {})
    present = sorted(t for t in crit.tags if t in tags)
    outcome: Outcome
    if any(crit.tags[t] == "fail" for t in present):
        outcome = "fail"
    elif present:
        outcome = "warn"
    elif observed:
        outcome = "pass"
    else:
        outcome = "not_evaluated"
    return CriterionResult(crit.key, crit.name, crit.status, outcome, present, observed)


def clamp(framework_score: float | None,
          upstream: float | None) -> tuple[float | None, bool]:
    """``(score, clamped_by_upstream)``: the max of the two; clamped when upstream set it."""
    if upstream is None:
        return framework_score, False
    if framework_score is None or upstream > framework_score:
        return upstream, True
    return framework_score, False


def score(fw: Framework, tags: Set[str], facts: Mapping[str, Any], upstream: float | None,
          scheme: str) -> Result:
    points = {"pass": fw.points.pass_, "warn": fw.points.warn, "fail": fw.points.fail}
    categories: list[CategoryResult] = []
    for cat in fw.categories:
        results = [evaluate_criterion(c, tags, facts) for c in cat.criteria]
        evaluated = [points[r.outcome] for r in results if r.outcome != "not_evaluated"]
        cat_score = round_score(math.fsum(evaluated) / len(evaluated)) if evaluated else None
        categories.append(CategoryResult(cat.key, cat.name, cat.weight, cat_score, results))
    counted = [(c.weight, c.score) for c in categories if c.score is not None and c.weight > 0]
    weight = math.fsum(w for w, _ in counted)
    framework_score = (round_score(math.fsum(w * s for w, s in counted) / weight)
                       if weight > 0 else None)
    upstream_risk = round_score(upstream) if upstream is not None else None
    final, clamped = clamp(framework_score, upstream_risk)
    grade: str | None = None
    stars: int | None = None
    caps: list[str] = []
    if final is not None:
        b: Band = band(final, scheme)
        for cap in fw.caps:
            if cap.applies(tags, upstream_risk):
                capped = cap_grade(b, cap.max_grade, scheme)
                if capped != b:
                    caps.append(cap.key)
                b = capped
        grade, stars = b.grade, b.stars
    composite = Composite(framework_score, upstream_risk, final, clamped, scheme, grade, stars,
                          caps)
    return Result(fw.version, composite, categories)

