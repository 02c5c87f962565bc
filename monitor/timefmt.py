"""Timestamps: parsed once at the edge into float epoch seconds, printed as ISO 8601 UTC."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Final

# The caches are Final (filled and cleared, never rebound): the mypyc build then reads them
# from a C static instead of looking each up in the module's dict on every tick.
_day_cache: Final[dict[str, float]] = {}
#: ``HH:MM:SSZ`` -> seconds into the day: a tick file repeats the clocks of its cadence
#: (1,440 for one-minute ticks), so one lookup replaces three ``int`` parses.
_clock_cache: Final[dict[str, int]] = {}


def fast_iso(text: str) -> float | None:
    """``YYYY-MM-DDTHH:MM:SSZ``, the shape of nearly every tick, without datetime; None
    for any other text (then :func:`parse_ts` decides: it tries this first)."""
    if len(text) != 20:
        return None
    # The caches are keyed by the day with its ``T`` and the clock with its ``Z``, and
    # only ever hold texts whose shape was checked (the ``T``, both colons, the ``Z``):
    # a row found in both needs no character test. A miss makes every test first, in
    # the order a plain check would (None before a date is parsed).
    try:
        day = _day_cache[text[:11]]
    except KeyError:
        if text[10] != "T" or text[19] != "Z" or text[13] != ":":
            return None
        if len(_day_cache) > 100_000:
            _day_cache.clear()
        day = datetime.fromisoformat(text[:10]).replace(tzinfo=UTC).timestamp()
        if day < 0.0:
            # Before 1970: refused by the full parser below, as in every other shape (it
            # was accepted in this one alone, and only this shape reaches the caches).
            return None
        _day_cache[text[:11]] = day
    clock = text[11:20]
    try:
        seconds = _clock_cache[clock]
    except KeyError:
        digits = clock[0:2] + clock[3:5] + clock[6:8]
        if clock[2] != ":" or clock[5] != ":" or clock[8] != "Z" or not (
                digits.isascii() and digits.isdigit()):
            # Not the plain shape ("07:50x00", "+7:50:00", " 7:50:00"), which int() would
            # read anyway: the full parser below decides, as it does for every other shape.
            return None
        h, m, sec = int(text[11:13]), int(text[14:16]), int(text[17:19])
        if h > 23 or m > 59 or sec > 59:
            raise ValueError(f"invalid time of day in {text!r}") from None
        # Whole seconds: ``day`` is a whole number of seconds, so ``day + seconds`` is
        # the same float as adding the hours, minutes and seconds one by one.
        seconds = h * 3600 + m * 60 + sec
        if len(_clock_cache) > 100_000:
            _clock_cache.clear()
        _clock_cache[clock] = seconds
    return day + seconds


def iso_caches() -> tuple[dict[str, float], dict[str, int]]:
    """:func:`fast_iso`'s two caches (``YYYY-MM-DDT`` -> the day's epoch seconds,
    ``HH:MM:SSZ`` -> seconds into the day), for a reader that looks a text up in them
    itself. They only ever hold keys whose shape ``fast_iso`` checked: a 20-character
    text found in both is the sum of the two values, as ``fast_iso`` would return it.
    Read only; a miss goes to ``fast_iso``, which fills them."""
    return _day_cache, _clock_cache


def parse_ts(value: str | float | int) -> float:
    """ISO 8601 (``Z`` or offset; naive means UTC) or epoch seconds -> epoch seconds.

    Raises ValueError on anything else, including NaN and infinities.
    """
    if isinstance(value, str):
        fast = fast_iso(value)
        if fast is not None:
            return fast
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


#: ``YYYY-MM-DDT`` per epoch day: replay stamps many distinct seconds, the webhook sender
#: many stamps within one second; a day-keyed date serves both (strftime was ~2 µs of every
#: rating snapshot and every delivery). Dropped whole when it grows past this.
_date_cache: Final[dict[int, str]] = {}
_DATE_CACHE_SIZE = 100_000


def format_ts(seconds: float) -> str:
    """Epoch seconds -> ``2023-03-11T07:50:00Z`` (milliseconds only when present)."""
    if 0.0 <= seconds < 253402300800.0:  # year 1970..9999: the cached path
        whole = math.floor(seconds)
        # Exactly datetime.fromtimestamp's microsecond: the fraction (exact for a
        # non-negative double) times 1e6, rounded half to even, carried into the second.
        micro = round((seconds - whole) * 1e6)
        if micro >= 1_000_000:
            micro -= 1_000_000
            whole += 1
        day, rest = divmod(whole, 86400)
        date = _date_cache.get(day)
        if date is None:
            if len(_date_cache) >= _DATE_CACHE_SIZE:
                _date_cache.clear()
            date = datetime.fromtimestamp(day * 86400, tz=UTC).strftime("%Y-%m-%dT")
            _date_cache[day] = date
        hours, rest = divmod(rest, 3600)
        minutes, secs = divmod(rest, 60)
        clock = f"{date}{hours:02d}:{minutes:02d}:{secs:02d}"
        return f"{clock}.{micro // 1000:03d}Z" if micro else clock + "Z"
    dt = datetime.fromtimestamp(seconds, tz=UTC)
    if dt.microsecond:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


class SecondStamps:
    """:func:`format_ts` for a caller that stamps many times within each second (the
    webhook sender's ``delivered_at``: thousands of deliveries a second). The text up to
    the second is :func:`format_ts`'s own, made once per second; a stamp adds its
    milliseconds, where :func:`format_ts` looks the day up and formats the time of day
    on every call: ~0.8 against ~1.9 µs a stamp (``benchmarks/bench_send_stamps.py``)."""

    __slots__ = ("_second", "_text")

    def __init__(self) -> None:
        self._second = -1
        self._text = ""  # format_ts of ``_second``, without its "Z"

    def format(self, seconds: float) -> str:
        """``format_ts(seconds)``, the same text."""
        if not 0.0 <= seconds < 253402300800.0:
            return format_ts(seconds)
        # format_ts's own split into the second and its microsecond (rounded, carried).
        whole = math.floor(seconds)
        micro = round((seconds - whole) * 1e6)
        if micro >= 1_000_000:
            micro -= 1_000_000
            whole += 1
        if whole != self._second:
            self._text = format_ts(float(whole))[:-1]
            self._second = whole
        return f"{self._text}.{micro // 1000:03d}Z" if micro else self._text + "Z"
