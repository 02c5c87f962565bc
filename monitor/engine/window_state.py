"""The saved form of :class:`~monitor.engine.windows.Windows` (the state topic's contract).

A module of its own so that ``windows`` can be compiled (monitor/compiled.py): mypyc
would turn a msgspec struct into a native class and change how it encodes.
"""

from __future__ import annotations

import msgspec


class WindowState(msgspec.Struct, array_like=True):
    """Serialisable contents of :class:`Windows` (for the state topic)."""

    head: int | None
    values: list[list[float]]
    last_price_ts: float | None
    last_dev: float | None
    base_s: float
    base_ts: float | None
