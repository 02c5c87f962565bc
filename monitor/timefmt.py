"""Timestamps: parsed once at the edge into float epoch seconds, printed as ISO 8601 UTC."""

from __future__ import annotations

import math
from datetime import UTC, datetime


def parse_ts(value: str | float | int) -> float:
    """ISO 8601 (``Z`` or offset; naive means UTC) or epoch seconds -> epoch seconds.

    Raises ValueError on anything else, including NaN and infinities.
    """
    if isinstance(value, bool):
        raise ValueError("timestamp must be ISO 8601 or epoch seconds, not a boolean")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = value.strip()
        if not text:
            raise ValueError("empty timestamp")
        try:
            seconds = float(text)
        except ValueError:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1))
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=UTC)
            seconds = dt.timestamp()
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"timestamp out of range: {value!r}")
    return seconds


def format_ts(seconds: float) -> str:
    """Epoch seconds -> ``2023-03-11T07:50:00Z`` (milliseconds only when present)."""
    dt = datetime.fromtimestamp(seconds, tz=UTC)
    if dt.microsecond:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")
