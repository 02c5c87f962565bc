"""API keys: random, shown once, stored as a SHA-256 hash plus a short display prefix.

A plain SHA-256 (no salt, no slow hash) is right here: the key is 32 random bytes, so
there is nothing to brute-force, and the hash doubles as the lookup index.
"""

from __future__ import annotations

import hashlib
import secrets

KEY_PREFIX = "dpm_"
#: Characters of the key kept in clear for display (``keys list``): the prefix plus 8.
DISPLAY_CHARS = len(KEY_PREFIX) + 8


def new_api_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def display_prefix(key: str) -> str:
    return key[:DISPLAY_CHARS]
