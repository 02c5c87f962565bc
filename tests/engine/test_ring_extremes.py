"""``readings._lowest``/``_highest`` (the compiled build's window extremes) against the
builtins over the same slice: the very same float, -0.0 against 0.0 and NaN included
(compared by ``repr``), at every start and end of a ring column. The pure modules keep the
builtins (``readings._NATIVE``), so the compiled build's replay is compared byte for byte
by tests/test_compiled_build.py; this compares the loops themselves, run either way."""

from __future__ import annotations

import math
import sys

from hypothesis import given
from hypothesis import strategies as st

from monitor.engine import readings
from monitor.engine.readings import _highest, _lowest

# Few distinct values, so that ties (0.0 and -0.0 among them) and NaNs are common.
cells = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, -0.25, math.inf, -math.inf, math.nan])
columns = st.lists(st.one_of(cells, st.floats()), min_size=1, max_size=70)


@given(column=columns, data=st.data())
def test_loops_are_the_builtins(column: list[float], data: st.DataObject) -> None:
    a = data.draw(st.integers(0, len(column) - 1))
    b = data.draw(st.integers(a, len(column) - 1))
    assert repr(_lowest(column, a, b)) == repr(min(column[a:b + 1]))
    assert repr(_highest(column, a, b)) == repr(max(column[a:b + 1]))


def test_first_of_equal_values_wins() -> None:
    # Distinct objects, equal values: the builtins keep the first (so must the loops).
    column = [1.0, 0.0, -0.0, 0.0, 2.0, math.nan, -0.0]
    assert repr(_lowest(column, 0, 6)) == repr(min(column)) == "0.0"
    assert repr(_lowest(column, 2, 6)) == repr(min(column[2:])) == "-0.0"
    assert repr(_highest(column, 1, 3)) == repr(max(column[1:4])) == "0.0"
    assert repr(_lowest(column, 5, 6)) == repr(min(column[5:])) == "nan"  # a NaN first


def test_interpreted_modules_keep_the_builtins() -> None:
    # Run from a .py file the module must not take the loops (3 times the builtins' cost).
    assert readings._NATIVE is (not readings.__file__.endswith(".py"))


@given(column=st.lists(st.floats(allow_nan=False), min_size=1, max_size=70),
       data=st.data())
def test_total_is_the_builtin_sum_on_311(column: list[float], data: st.DataObject) -> None:
    # The compiled build's sums: CPython 3.11's ``sum`` (plain additions in order). From
    # 3.12 ``sum`` compensates and the build keeps it (``_NATIVE_SUM`` is off there).
    a = data.draw(st.integers(0, len(column) - 1))
    b = data.draw(st.integers(a, len(column) - 1))
    plain = 0.0
    for x in column[a:b + 1]:
        plain += x
    assert repr(readings._total(column, a, b)) == repr(plain)
    if sys.version_info < (3, 12):
        assert repr(readings._total(column, a, b)) == repr(sum(column[a:b + 1], 0.0))
    else:
        assert not readings._NATIVE_SUM


def test_total_adds_in_order() -> None:
    # An order-sensitive sum: any other order gives another float.
    column = [1e16, 1.0, -1e16, 1.0, 3.0]
    assert repr(readings._total(column, 0, 4)) == repr(sum(column, 0.0)) == "4.0"
    assert repr(readings._total(column, 1, 3)) == repr(sum(column[1:4], 0.0))
