"""The live-monitor benchmarks' ticks: random walks around a 1.0 peg, keyed
``chain:token`` (:func:`synthetic`), published once (:func:`produce`), and the event
time each side reads before its timing starts (:func:`warmup_seconds`).

Imported by bench_monitor.py (the table's live rows), monitor_loop.py, bench_emit.py and
the tests of the warm-up; not a command itself.
"""

from __future__ import annotations

import random
import time

from monitor.chains import CHAINS
from monitor.config import ModelConfig
from monitor.testing import publish
from monitor.ticks import encode_tick, make_tick


def synthetic(n_ticks: int, n_tokens: int, seed: int = 7,
              spacing: int = 60) -> list[tuple[bytes, bytes]]:
    """``n_ticks`` ticks as (key, JSON value), the ``n_tokens`` tokens in turn, a token's
    ticks ``spacing`` event seconds apart: a random walk around 1.0 each, every fiftieth
    token drifting down after 20 steps (so tiers change). Seeded: every side of a row,
    and every run, reads the same bytes."""
    rng = random.Random(seed)
    tokens = [(CHAINS[i % len(CHAINS)], f"0x{i:040x}") for i in range(n_tokens)]
    prices = [1.0] * n_tokens
    out = []
    t0 = 1_700_000_000
    for i in range(n_ticks):
        j = i % n_tokens
        step = i // n_tokens
        drift = -0.002 if j % 50 == 0 and step > 20 else 0.0  # some tokens depeg
        prices[j] = max(0.5, prices[j] + drift + rng.gauss(0, 0.0004))
        chain, token = tokens[j]
        tick = make_tick(t0 + spacing * step, chain, token, f"T{j}", f"{prices[j]:.6f}", "1")
        out.append((tick.key.encode(), encode_tick(tick)))
    return out


async def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> float:
    """Publish ``records`` to ``topic`` once, in order (acks=all: every side reads them all
    from the broker); returns the records published per second."""
    started = time.perf_counter()
    await publish(bootstrap, topic, records, linger_ms=20, max_batch_size=256 * 1024,
                  window=20000)
    return len(records) / (time.perf_counter() - started)


def warmup_seconds(model: ModelConfig, spacing: int) -> float:
    """Event seconds per token a row reads before its timing starts, so the timed ticks
    cost what they cost a monitor that has been running (live, every tick taken is also
    applied; read from an empty start, the first ``lateness_seconds`` of ticks are only
    held: timed from the start, 300,000 ticks at one a second read 0.73 of the bare
    consumer, against 0.57 past this warm-up, in one session, docs/performance.md).

    The lateness, then: at one tick a minute the longest window (the rings full, so a
    refresh reads as many buckets as it ever will); at one a second one refresh period
    (the rings fill only after an hour, 3.6 M ticks for 1,000 tokens, too many to publish
    here; a refresh's reads there are spread over 300 ticks)."""
    longest = max(model.deviation_window_seconds, model.persistence_window_seconds,
                  model.volatility_window_seconds, model.calm_window_seconds,
                  model.floor_window_seconds)
    fill = longest if spacing >= 60 else model.refresh_seconds
    return float(model.lateness_seconds + fill)
