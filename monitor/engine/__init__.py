"""The pure engine: ticks in, rating snapshots and tier changes out. No I/O, no clock.

Public surface::

    engine = Engine(ModelConfig())
    outputs = engine.process(tick)        # list[Output], in event-time order
    outputs = engine.advance(key, ts)     # refresh a quiet token up to event time ts
    outputs = engine.flush()              # release what the lateness buffer still holds
    blob = engine.export_state(key)       # bytes: the token's whole state (windows, tier)
    engine.restore_state(blob)            # continue exactly where that state stopped
    engine.stats                          # counters: ticks, late, duplicates, no_peg
"""

from ..compiled import search_first as _search_first

_search_first(__name__, __path__)

from .engine import Engine, EngineStats, Output  # noqa: E402

__all__ = ["Engine", "EngineStats", "Output"]
