"""``format_ts``'s short-cut (a cached date, the time of day by arithmetic, the microsecond
rounded and carried as datetime does) gives the text of the datetime path it stands in for:
checked against that path, written out here as the independent reference, over whole and
fractional seconds, ints and the edges. Replay output and every webhook's ``delivered_at``
use it, so a byte of difference is a bug."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from monitor.timefmt import SecondStamps, format_ts

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


def test_random_and_edge_values_match_datetime() -> None:
    rng = random.Random(15)
    values = [rng.uniform(0, 4e9) for _ in range(20_000)]
    values += [float(int(rng.uniform(0, 4e9))) + f for _ in range(300)
               for f in (0.0, 0.9999995, 0.9999994, 0.9999996, 5e-7, 1.5e-6, 0.0005,
                         0.0009995, 0.9995, 0.5)]
    values += [1.7e9 + i * 1e-7 for i in range(20_000)]  # now, sub-millisecond steps
    values += [0.0, 0.25, 253402300799.999]  # the cached path's ends
    assert [v for v in values if format_ts(v) != reference(v)] == []


def test_the_same_second_twice_and_the_carry() -> None:
    assert format_ts(1_700_000_000.5) == "2023-11-14T22:13:20.500Z"
    assert format_ts(1_700_000_000.25) == "2023-11-14T22:13:20.250Z"  # cached prefix
    assert format_ts(1_700_000_000.0) == "2023-11-14T22:13:20Z"
    assert format_ts(1_700_000_000.9999996) == "2023-11-14T22:13:21Z"  # carried


@given(st.lists(st.floats(-86400.0 * 3, float(END - 1), allow_nan=False), max_size=40))
def test_second_stamps_give_the_reference_text(values: list[float]) -> None:
    """The sender's stamps (the text up to the second made once per second) in any order,
    so each call may or may not find its second's text cached."""
    stamps = SecondStamps()
    assert [stamps.format(v) for v in values] == [reference(v) for v in values]


def test_second_stamps_many_a_second_and_across_seconds() -> None:
    """A worker's pattern: many stamps within a second, then the next second, and the
    carry from ``…59.9999996`` into the next second (and day) in the middle of a run."""
    stamps = SecondStamps()
    values = [1.7e9 + i * 0.0003 for i in range(20_000)]  # ~6 s, 3,333 stamps a second
    values += [86399.9999996, 86399.5, 86400.0, 86399.9999994, 1e9 + 0.0005, 1e9]
    values += [float(END - 1) + 0.999, 0.0, -0.0, -1e9, -1e9 + 0.25]  # before 1970 too
    assert [v for v in values if stamps.format(v) != reference(v)] == []


@pytest.mark.parametrize("seconds", [math.nan, math.inf, float(END)])
def test_second_stamps_out_of_range_as_format_ts(seconds: float) -> None:
    with pytest.raises((ValueError, OverflowError)) as got:
        format_ts(seconds)
    with pytest.raises(type(got.value)):
        SecondStamps().format(seconds)
