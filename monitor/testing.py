"""Record builders and a publisher for tests, benchmarks and integrators.

Build a well-formed :class:`~monitor.records.TierChangeEvent` or
:class:`~monitor.records.RatingSnapshot` in one call, for example to exercise a webhook
receiver or a consumer of ``depeg.tier-changes`` without running the engine. Event ids are
the real deterministic ones, so the same arguments give the same event. :func:`publish`
puts records on a topic, for example encoded ticks for a monitor under test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from aiokafka import AIOKafkaProducer

from .config import ModelConfig
from .engine.tiers import band
from .records import (
    EVENT_TYPE,
    RatingSnapshot,
    SignalValue,
    TierChangeData,
    TierChangeEvent,
    event_id,
)
from .timefmt import format_ts

SIGNALS = ("price_deviation", "slippage", "persistence_50bp", "persistence_100bp",
           "volatility_burst", "headroom")


def tier_change(chain: str, token: str, at: float, old_tier: str, new_tier: str, *,
                rating: float = 50.0, price: float = 1.0, symbol: str = "TKN") -> TierChangeEvent:
    """A tier change at event time ``at`` (epoch seconds) for a token pegged at 1 USD."""
    stamp = format_ts(at)
    data = TierChangeData(token, chain, symbol, old_tier, new_tier, rating,
                          (price - 1.0) * 100.0, f"{price:.6f}", "1.000000")
    return TierChangeEvent(EVENT_TYPE, event_id(chain, token, stamp, old_tier, new_tier), stamp,
                           data)


def rating_snapshot(chain: str, token: str, at: float, rating: float, tier: str | None = None,
                    *, price: float = 1.0, peg: float = 1.0, symbol: str = "TKN",
                    detail: bool = True) -> RatingSnapshot:
    """A rating snapshot; ``tier`` defaults to the rating's band. With ``detail`` it carries
    the six signals and 30 placeholder metrics, as the engine's snapshots do."""
    tier = tier or band(rating, ModelConfig()).value
    dev = (price - peg) / peg * 100.0
    signals = [SignalValue(n, dev if n == "price_deviation" else None,
                           min(1.0, rating / 100.0), 1 / 6, rating / 6, n == "price_deviation")
               for n in SIGNALS] if detail else []
    metrics: dict[str, float | None] = {}
    if detail:
        metrics = {f"m{i}": float(i) for i in range(30)}
        metrics["price_twap_5m"] = price
    return RatingSnapshot(chain, token, symbol, format_ts(at), rating, tier, tier,
                          f"{price:.6f}", f"{peg:.6f}", dev, 0.0, signals, metrics)


async def publish(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes]],
                  *, linger_ms: int = 5, max_batch_size: int = 16384,
                  window: int = 5000) -> int:
    """Publish ``(key, value)`` records to ``topic`` once, in order, and return how many
    once the broker acknowledged every one (``acks="all"``, no idempotent producer): a
    consumer started afterwards reads them all. Keyed records land where the monitor's own
    producer would put them (aiokafka's default partitioner). Sends are pipelined and
    awaited ``window`` at a time, which bounds the client's memory for long inputs."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=linger_ms,
                                enable_idempotence=False, max_batch_size=max_batch_size)
    await producer.start()
    n = 0
    try:
        futures = []
        for key, value in records:
            futures.append(await producer.send(topic, value, key=key))
            n += 1
            if len(futures) >= window:
                await asyncio.gather(*futures)
                futures.clear()
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return n
