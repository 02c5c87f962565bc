"""``format_ts``'s cached per-second path against datetime, the reference it replaced.

The webhook sender stamps every delivery's ``delivered_at`` with it, and replay output
uses it too, so it must give exactly the bytes datetime gives, including the rounding
of the microsecond and its carry into the next second."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from monitor.timefmt import format_ts


def reference(seconds: float) -> str:
    dt = datetime.fromtimestamp(seconds, tz=UTC)
    if dt.microsecond:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


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
