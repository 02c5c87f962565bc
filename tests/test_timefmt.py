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
