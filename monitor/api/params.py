"""Query-parameter parsing with one 400 shape: ``{"error", "parameter", "allowed"|...}``.

A value outside its set names the allowed values, so a client can fix the request
without reading the docs. Unknown parameter *names* are refused too (a typo such as
``pagesize`` would otherwise silently return the default page), as the webhook routes do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import ApiError

TRUE = frozenset({"true", "1", "yes"})
FALSE = frozenset({"false", "0", "no"})


def bad(name: str, message: str, **details: Any) -> ApiError:
    return ApiError(400, message, parameter=name, **details)


def known(query: Mapping[str, str], names: Iterable[str]) -> None:
    allowed = list(names)
    for name in query:
        if name not in allowed:
            raise bad(name, f"unknown query parameter {name[:40]!r}", allowed=allowed)


def enum(query: Mapping[str, str], name: str, allowed: Iterable[str],
         default: str | None = None) -> str | None:
    value = query.get(name)
    if value is None:
        return default
    options = list(allowed)
    if value not in options:
        raise bad(name, f"invalid value for {name}: {value[:40]!r}", allowed=options)
    return value


def enum_list(query: Mapping[str, str], name: str, allowed: Iterable[str]) -> tuple[str, ...]:
    """Comma-separated values, each from ``allowed``."""
    value = query.get(name)
    if value is None:
        return ()
    options = list(allowed)
    parts = tuple(p.strip() for p in value.split(","))
    wrong = [p for p in parts if p not in options]
    if wrong:
        raise bad(name, f"invalid value for {name}: {wrong[0][:40]!r}", allowed=options)
    return tuple(dict.fromkeys(parts))


def integer(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    value = query.get(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise bad(name, f"{name} must be an integer", minimum=low, maximum=high) from None
    if not low <= number <= high:
        raise bad(name, f"{name} must be between {low} and {high}", minimum=low, maximum=high)
    return number


def number(query: Mapping[str, str], name: str, low: float = 0.0) -> float | None:
    value = query.get(name)
    if value is None:
        return None
    try:
        parsed = float(value)
    except ValueError:
        raise bad(name, f"{name} must be a number", minimum=low) from None
    if not math.isfinite(parsed) or parsed < low:
        raise bad(name, f"{name} must be a finite number >= {low:g}", minimum=low)
    return parsed


def boolean(query: Mapping[str, str], name: str, default: bool = False) -> bool:
    value = query.get(name)
    if value is None:
        return default
    lowered = value.lower()
    if lowered in TRUE:
        return True
    if lowered in FALSE:
        return False
    raise bad(name, f"invalid value for {name}: {value[:40]!r}", allowed=["true", "false"])


def text(query: Mapping[str, str], name: str, max_length: int) -> str | None:
    value = query.get(name)
    if value is None or not value.strip():
        return None
    if len(value) > max_length:
        raise bad(name, f"{name} is longer than {max_length} characters", maxLength=max_length)
    if any(ord(ch) < 0x20 or ch == "\x7f" for ch in value):
        raise bad(name, f"{name} contains control characters")
    return value.strip()
