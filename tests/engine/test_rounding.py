"""``rounding.scaled`` (the compiled build's ``round(x, digits)``) against the builtin:
the very same float (by ``repr``: -0.0 and 0.0 differ) wherever it answers, and it
declines (NaN) near a tie, on one, and where ``x * 10**digits`` is too large."""

from __future__ import annotations

import math

from hypothesis import example, given
from hypothesis import strategies as st

from monitor.engine import rounding
from monitor.engine.rounding import round_to, scaled

DIGITS = st.sampled_from([0, 1, 2, 3, 4, 6])  # the engine rounds to 2, 3, 4 and 6 digits


@given(x=st.floats(allow_nan=True, allow_infinity=True), digits=DIGITS)
@example(x=0.125, digits=2)      # an exact tie: half-even gives 0.12
@example(x=0.375, digits=2)      # an exact tie the other way: 0.38
@example(x=-0.0000001, digits=4)  # rounds to -0.0
@example(x=2.675, digits=2)      # stored below the tie: 2.67
@example(x=1e-320, digits=6)
def test_scaled_is_round(x: float, digits: int) -> None:
    r = scaled(x, 10.0 ** digits)
    if r == r:
        assert repr(r) == repr(round(x, digits))
    assert repr(round_to(x, digits, 10.0 ** digits)) == repr(round(x, digits))


@given(k=st.integers(-10**8, 10**8), digits=DIGITS,
       nudge=st.sampled_from([-2, -1, 0, 1, 2]))
def test_near_ties(k: int, digits: int, nudge: int) -> None:
    # The doubles at and next to the decimal half-way points k + 0.5 (scaled back).
    x = (k + 0.5) / 10.0 ** digits
    for _ in range(abs(nudge)):
        x = math.nextafter(x, math.inf if nudge > 0 else -math.inf)
    r = scaled(x, 10.0 ** digits)
    if r == r:
        assert repr(r) == repr(round(x, digits))
    assert repr(round_to(x, digits, 10.0 ** digits)) == repr(round(x, digits))


@given(x=st.floats(-1e4, 1e4), digits=DIGITS)
def test_answers_away_from_ties(x: float, digits: int) -> None:
    # The short path must answer for ordinary values (else it saves nothing).
    p = x * 10.0 ** digits
    if abs(p) < 1e9 and abs(p - math.floor(p + 0.5)) < 0.49:
        assert scaled(x, 10.0 ** digits) == scaled(x, 10.0 ** digits)  # not NaN


def test_declines_on_ties_and_large_values() -> None:
    assert math.isnan(scaled(0.125, 100.0))
    assert math.isnan(scaled(1e12, 100.0))
    assert math.isnan(scaled(math.nan, 100.0))
    assert math.isnan(scaled(math.inf, 100.0))


def test_interpreted_module_is_not_native() -> None:
    assert rounding.NATIVE is (not rounding.__file__.endswith(".py"))
