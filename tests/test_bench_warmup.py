"""The live-monitor benchmark's warm-up: past it, every tick taken is also applied.

``bench_monitor.py`` times each side only after ``monitor_ticks.warmup_seconds`` of event
time per token. Its rows are meant to price a running monitor, where each tick taken
releases one held tick; before the warm-up existed, the first ``lateness_seconds`` of
ticks were only held and the one-a-second row read 0.73 where a running monitor reads
0.57. The engine's own counters over the timed ticks are the truth checked here (not a
figure of the script).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from monitor_ticks import synthetic, warmup_seconds

from monitor.config import ModelConfig
from monitor.engine import Engine
from monitor.engine.outputs import Output
from monitor.ticks import decode_tick

TOKENS = 5


@pytest.mark.parametrize("spacing", [1, 60])
def test_past_the_warmup_each_tick_taken_is_applied(spacing: int) -> None:
    model = ModelConfig()
    warm = TOKENS * math.ceil(warmup_seconds(model, spacing) / spacing)
    # One refresh period of timed ticks at 1/s (the row's default), 100 minutes at 1/min.
    timed = TOKENS * (model.refresh_seconds if spacing == 1 else 100)
    records = synthetic(warm + timed, TOKENS, spacing=spacing)
    engine = Engine(model)
    out: list[Output] = []
    for _, value in records[:warm]:
        tick = decode_tick(value)
        engine.take(tick, tick.key, None, out)
    applied, refreshes = engine.stats.applied, engine.stats.refreshes
    for _, value in records[warm:]:
        tick = decode_tick(value)
        before = engine.stats.applied
        engine.take(tick, tick.key, None, out)
        assert engine.stats.applied == before + 1
    assert engine.stats.applied - applied == timed
    # Each token's refresh cadence falls inside the timed ticks, as in a running monitor.
    per_token = (timed // TOKENS) * spacing // model.refresh_seconds
    assert engine.stats.refreshes - refreshes == TOKENS * per_token


def test_without_the_warmup_a_one_a_second_run_leaves_ticks_only_held() -> None:
    """The flaw the warm-up removes (a check that the test above can fail)."""
    model = ModelConfig()
    timed = TOKENS * model.refresh_seconds
    engine = Engine(model)
    out: list[Output] = []
    for _, value in synthetic(timed, TOKENS, spacing=1):
        tick = decode_tick(value)
        engine.take(tick, tick.key, None, out)
    assert engine.stats.applied <= timed - TOKENS * model.lateness_seconds
