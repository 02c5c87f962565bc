"""``format_ts``'s whole-second short-cut (a cached date, the time by arithmetic) gives the
text of the datetime path it stands in for: checked against that path, written out here
as the independent reference, over whole and fractional seconds, ints and the edges."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.timefmt import format_ts

#: The first second of the year 10000, where datetime (and the short-cut) stop.
END = 253402300800


def reference(seconds: float) -> str:
    dt = datetime.fromtimestamp(seconds, tz=UTC)
    if dt.microsecond:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


@given(st.integers(0, END - 1))
def test_whole_seconds(whole: int) -> None:
    assert format_ts(float(whole)) == reference(float(whole))
    assert format_ts(whole) == reference(whole)


@given(st.floats(-86400.0 * 3, float(END - 1), allow_nan=False))
def test_any_second(seconds: float) -> None:
    assert format_ts(seconds) == reference(seconds)


@pytest.mark.parametrize("seconds", [0.0, -0.0, 59.0, 86399.0, 86400.0, 951782400.0,
                                     1678521600.0, END - 1.0, 1e9 + 0.0005, -1.0])
def test_edges(seconds: float) -> None:
    assert format_ts(seconds) == reference(seconds)


@pytest.mark.parametrize("seconds", [math.nan, math.inf, float(END)])
def test_out_of_range_raises_as_before(seconds: float) -> None:
    with pytest.raises((ValueError, OverflowError)) as got:
        format_ts(seconds)
    with pytest.raises(type(got.value)):
        reference(seconds)
