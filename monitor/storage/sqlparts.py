"""Small pieces the read queries share: numbered parameters and LIKE patterns."""

from __future__ import annotations

from typing import Any


class Params:
    """Collects query arguments; calling it with a value returns its ``$n`` marker."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def __call__(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"


def like_pattern(text: str) -> str:
    """``%text%`` in lowercase with LIKE's wildcards escaped (use ``ESCAPE '\\'``)."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
