"""JSON from clients, decoded with a nesting limit: a 5,000-level body is a 400, not a 500.

msgspec decodes recursively and raises ``RecursionError`` somewhere past a thousand levels;
nothing the API accepts nests deeper than a handful. So the depth is checked first, by a
linear scan that counts brackets outside strings, and the limit is well under the one
that would crash.
"""

from __future__ import annotations

from typing import Any

import msgspec

#: Deeper than any request body or cursor the API defines (filters nest 2 levels).
MAX_DEPTH = 32


class JsonError(ValueError):
    """Not JSON, or nested deeper than :data:`MAX_DEPTH`; the message says which."""


def nesting_depth(raw: bytes, stop_after: int = MAX_DEPTH) -> int:
    """Maximum bracket depth of ``raw`` (stops counting once past ``stop_after``)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop_after:
                    return deepest
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return deepest


def decode(raw: bytes, max_depth: int = MAX_DEPTH) -> Any:
    if nesting_depth(raw, max_depth) > max_depth:
        raise JsonError(f"nested deeper than {max_depth} levels")
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise JsonError(f"not valid JSON ({exc})") from None
    except RecursionError:  # belt and braces: never a 500 for a client's bytes
        raise JsonError(f"nested deeper than {max_depth} levels") from None
