"""Golden grades: every band edge of both schemes, fractional scores, caps, the clamp rule."""

from __future__ import annotations

import pytest

from monitor.framework.composite import clamp, score
from monitor.framework.grading import SCHEMES, band, round_score
from monitor.framework.model import load_framework

# The 11-band scale as published (research/vault-anchors.md), written out independently of
# monitor/framework/grading.py: (lowest integer score, highest integer score, grade).
V2 = [(0, 5, "A+"), (6, 12, "A"), (13, 20, "A-"), (21, 28, "B+"), (29, 37, "B"),
      (38, 46, "B-"), (47, 56, "C+"), (57, 66, "C"), (67, 77, "C-"), (78, 88, "D"),
      (89, 100, "F")]
V1 = [(0, 19, "A"), (20, 34, "B"), (35, 59, "C"), (60, 74, "D"), (75, 100, "F")]


def _edges(table: list[tuple[int, int, str]]) -> list[tuple[float, str]]:
    cases: list[tuple[float, str]] = []
    for i, (low, high, grade) in enumerate(table):
        cases += [(low, grade), (high, grade)]
        if i + 1 < len(table):
            worse = table[i + 1][2]
            # Between two integer edges: never the better grade.
            cases += [(high + 0.01, worse), (high + 0.5, worse), (high + 0.99, worse),
                      (high + 0.004, grade),  # rounds to ``high`` at 2 decimals
                      (high + 0.005, worse)]  # rounds half up to high + 0.01
    return cases


@pytest.mark.parametrize(("value", "grade"), _edges(V2))
def test_v2_band_edges(value: float, grade: str) -> None:
    assert band(value, "v2").grade == grade


@pytest.mark.parametrize(("value", "grade"), _edges(V1))
def test_v1_band_edges(value: float, grade: str) -> None:
    assert band(value, "v1").grade == grade


def test_every_integer_score_brute_force() -> None:
    for table, scheme in ((V2, "v2"), (V1, "v1")):
        for s in range(101):
            [want] = [g for lo, hi, g in table if lo <= s <= hi]
            assert band(float(s), scheme).grade == want, (scheme, s)


def test_published_example_and_stars() -> None:
    assert band(98.5, "v2").grade == "F" and band(98.5, "v2").stars == 1  # published example
    stars = [b.stars for b in SCHEMES["v2"]]
    assert stars == sorted(stars, reverse=True) and stars[0] == 5 and stars[-1] == 1
    assert [b.stars for b in SCHEMES["v1"]] == [5, 4, 3, 2, 1]


def test_out_of_range_and_unknown_scheme() -> None:
    for bad in (-0.01, 100.01, float("nan")):
        with pytest.raises(ValueError):
            band(bad)
    with pytest.raises(ValueError):
        band(10, "v3")
    assert round_score(0.125) == 0.13 and round_score(2.675) == 2.68  # half up, not binary


# The clamp rule table: composite = max(framework, upstream); clamped exactly when the
# upstream value set it.
@pytest.mark.parametrize(("framework", "upstream", "result", "clamped"), [
    (40.0, 20.0, 40.0, False),   # framework above upstream
    (20.0, 40.0, 40.0, True),    # framework below upstream
    (30.0, 30.0, 30.0, False),   # equal: the framework alone already gives it
    (None, 55.0, 55.0, True),    # nothing evaluated: upstream alone
    (35.0, None, 35.0, False),   # vault unrated upstream
    (None, None, None, False),
])
def test_clamp_rule(framework: float | None, upstream: float | None, result: float | None,
                    clamped: bool) -> None:
    assert clamp(framework, upstream) == (result, clamped)


def test_blocked_redemption_never_above_d() -> None:
    fw = load_framework()
    facts = {"redemption_open": False, "source_verified": True, "audit_count": 3}
    for scheme in ("v1", "v2"):
        for upstream in (0.0, 10.0, 50.0, 70.0):
            r = score(fw, {"vault-redemption-closed"}, facts, upstream, scheme)
            grades = [b.grade for b in SCHEMES[scheme]]
            assert r.composite.grade is not None
            assert grades.index(r.composite.grade) >= grades.index("D"), (scheme, upstream)
        # 95 is F anyway: the cap only lowers, never raises.
        r = score(fw, {"vault-redemption-closed"}, facts, 95.0, scheme)
        assert r.composite.grade == "F" and r.composite.caps_applied == []
    r = score(fw, {"vault-redemption-closed"}, facts, 0.0, "v2")
    assert r.composite.caps_applied == ["blocked_redemption"] and r.composite.stars == 1


@pytest.mark.parametrize(("upstream", "grade", "capped"), [
    (74.99, "C-", False), (75.0, "D", True), (77.0, "D", True), (78.0, "D", False),
    (89.0, "F", False),
])
def test_critical_tier_never_above_d(upstream: float, grade: str, capped: bool) -> None:
    r = score(load_framework(), set(), {}, upstream, "v2")
    assert r.composite.grade == grade
    assert (r.composite.caps_applied == ["critical_tier"]) is capped
