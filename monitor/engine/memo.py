"""Per-configuration tables, worked out once instead of once per refresh."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def per_config(fn: Callable[[K], V]) -> Callable[[K], V]:
    """Cache ``fn``'s result for the last (immutable) configuration object, by identity.

    ``functools.lru_cache`` would hash the frozen config on every call, and hashing a
    struct of some forty fields costs more than most of what is cached; an engine keeps
    one config, so one entry found by ``is`` is all that is needed.
    """
    last: list[tuple[K, V]] = []

    def cached(config: K) -> V:
        if last and last[0][0] is config:
            return last[0][1]
        value = fn(config)
        last[:] = [(config, value)]
        return value

    cached.__doc__ = fn.__doc__
    cached.__name__ = fn.__name__
    return cached
