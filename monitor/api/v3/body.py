"""The V3 graded shape as JSON: composite, categories, coverage (E3 and E8 alike)."""

from __future__ import annotations

from typing import Any

import msgspec

from ...framework.composite import Result
from ...framework.grading import SCHEMES
from ...framework.model import Framework
from .pins import SCHEMA_VERSION


def composite_json(result: Result) -> dict[str, Any]:
    c = result.composite
    return {
        "score": c.score,
        "clamped_by_upstream": c.clamped_by_upstream,
        "grade": c.grade,
        "stars": c.stars,
        "grading_scheme": c.grading_scheme,
        "framework_score": c.framework_score,
        "upstream_risk": c.upstream_risk,
        "caps_applied": c.caps_applied,
        "contributors": {cat.key: {"score": cat.score, "weight": cat.weight}
                         for cat in result.categories},
    }


def categories_json(result: Result) -> list[dict[str, Any]]:
    return [{
        "key": cat.key, "name": cat.name, "weight": cat.weight, "score": cat.score,
        "criteria": [{
            "key": c.key, "name": c.name, "status": c.status, "result": c.outcome,
            "evidence": {"tags": c.tags, "facts": msgspec.to_builtins(c.facts)},
        } for c in cat.criteria],
    } for cat in result.categories]


def graded(result: Result, risk: Any, metadata: Any) -> dict[str, Any]:
    """The whole V3 body around ``risk`` and ``metadata`` (both passed through verbatim)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "framework_version": result.framework_version,
        "risk": risk,
        "metadata": metadata,
        "composite": composite_json(result),
        "categories": categories_json(result),
        "coverage": result.coverage(),
    }


def framework_json(fw: Framework, supported_versions: list[str],
                   supported_schemes: list[str]) -> dict[str, Any]:
    """E9: the taxonomy with live/planned status, the versions and schemes, the bands."""
    crits = [crit for _, crit in fw.criteria()]
    live = sum(c.status == "live" for c in crits)
    return {
        "framework_version": fw.version,
        "kind": fw.kind,
        "published": fw.published,
        "description": fw.description,
        "supported_versions": supported_versions,
        "supported_schemes": supported_schemes,
        "points": {"pass": fw.points.pass_, "warn": fw.points.warn, "fail": fw.points.fail},
        "caps": [msgspec.to_builtins(c) for c in fw.caps],
        "grading_schemes": {
            name: {"bands": [{"grade": b.grade, "min": b.low, "max": b.high, "stars": b.stars}
                             for b in SCHEMES[name]],
                   "rounding": "score rounded to 2 decimals (half up), then the first band "
                               "whose max is >= the score"}
            for name in supported_schemes},
        "categories": [{
            "key": cat.key, "name": cat.name, "weight": cat.weight,
            "description": cat.description,
            "criteria": [{"key": c.key, "name": c.name, "status": c.status,
                          "description": c.description, "facts": c.facts,
                          "tags": dict(c.tags)} for c in cat.criteria],
        } for cat in fw.categories],
        "coverage": {"criteria_total": len(crits), "criteria_live": live,
                     "criteria_planned": len(crits) - live},
    }
