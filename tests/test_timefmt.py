"""``parse_ts``: its fast path for ``YYYY-MM-DDTHH:MM:SSZ`` agrees with ``datetime`` and
never reads a malformed stamp that the full parser would refuse."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from monitor.timefmt import parse_ts


def test_plain_stamps_equal_datetime() -> None:
    rng = random.Random(15)
    for _ in range(5_000):
        seconds = rng.randrange(0, 4_102_444_800)  # 1970 .. 2100
        text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert parse_ts(text) == float(seconds), text
        assert parse_ts(text) == float(seconds), text  # second read: from the caches


@pytest.mark.parametrize("text", [
    "2024-03-11T07:50x00Z",   # wrong separator where the seconds start
    "2024-03-11T07x50:00Z",   # wrong separator where the minutes start
    "2024-03-11T+7:50:00Z",   # a sign int() would accept
    "2024-03-11T 7:50:00Z",   # a space int() would accept
    "2024-03-11T07:5_:00Z",
    "2024-03-11T24:00:00Z",   # hour out of range
    "2024-03-11T07:60:00Z",
    "2024-03-11T07:50:60Z",
])
def test_malformed_clock_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_ts(text)


def test_refusal_is_not_cached_as_a_valid_clock() -> None:
    """A malformed clock sharing the cache key's shape with nothing valid stays refused on
    a second read, and a valid one read after it still parses."""
    for _ in range(2):
        with pytest.raises(ValueError):
            parse_ts("2024-03-11T07:50x01Z")
    assert parse_ts("2024-03-11T07:50:01Z") == datetime(2024, 3, 11, 7, 50, 1,
                                                       tzinfo=UTC).timestamp()


@pytest.mark.parametrize("value", [
    "1969-12-31T23:59:59Z", "1969-12-31T23:59:59+00:00", "1969-12-31 23:59:59",
    "1900-01-01T00:00:00Z", -1, -1.5, "-1"])
def test_times_before_1970_are_refused_in_every_shape(value: str | float) -> None:
    """Epoch seconds below zero were refused, and ISO times before 1970 too, except in
    the plain ``Z`` shape (the fast path's), which read them as negative seconds."""
    for _ in range(2):  # the second read would come from the caches
        with pytest.raises(ValueError, match="out of range"):
            parse_ts(value)
    assert parse_ts("1970-01-01T00:00:00Z") == 0.0
