"""Opaque keyset cursors: ``[sort, sort value, chain, address]`` as URL-safe base64 JSON.

The sort is inside the cursor so a cursor made for one order is refused for another
(continuing it would skip or repeat items).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgspec

from . import jsonbody, params


def encode_cursor(sort: str, key: tuple[Any, str, str]) -> str:
    raw = msgspec.json.encode([sort, *key])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, sort: str, text_key: bool) -> tuple[Any, str, str]:
    """The (value, chain, address) after which the next page starts; 400 when the cursor
    is malformed or was made for another sort. ``text_key``: the sort value is a string."""
    invalid = "invalid cursor: pass nextCursor from a previous page"
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        c_sort, value, chain, address = jsonbody.decode(raw)
    except (binascii.Error, ValueError, TypeError):  # jsonbody.JsonError is a ValueError
        raise params.bad("cursor", invalid) from None
    if c_sort != sort:
        raise params.bad("cursor", "cursor was made for another sort", sort=str(c_sort)[:40])
    wanted: type | tuple[type, ...] = str if text_key else (int, float)
    if not (isinstance(value, wanted) and not isinstance(value, bool)
            and isinstance(chain, str) and isinstance(address, str)):
        raise params.bad("cursor", invalid)
    return value, chain, address
