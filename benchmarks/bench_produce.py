"""Producer throughput: ticks per second into a real (embedded Tansu) broker.

    python benchmarks/bench_produce.py [--ticks N] [--tokens N]

Measures, in one run: the pure generator alone, ``encode_tick`` alone, and the whole
``produce`` path (generate -> encode -> batched aiokafka send -> flush) against a fresh
embedded broker, so a load test knows how fast ``produce simulate`` / ``replay --speed max``
can feed the monitor. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from monitor.config import KafkaConfig
from monitor.kafka.embedded import EmbeddedBroker
from monitor.ticks import Tick, encode_tick
from producers.kafka_out import open_sender
from producers.publish import publish_rows
from producers.synthetic import generate, make_tokens


def ticks(count: int, tokens: int) -> list[Tick]:
    specs = make_tokens(tokens, 1)
    gen = generate(specs, seed=1, start=1_700_000_000.0, interval=1.0)
    return [next(gen) for _ in range(count)]


async def through_kafka(data: list[Tick], bootstrap: str) -> float:
    sender = await open_sender(bootstrap, KafkaConfig())
    start = time.perf_counter()
    try:
        await publish_rows(data, sender, speed=None, stop=asyncio.Event())
    finally:
        await sender.close()  # includes the flush: every record acknowledged
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description="Producer throughput into an embedded broker.")
    parser.add_argument("--ticks", type=int, default=200_000)
    parser.add_argument("--tokens", type=int, default=1000)
    args = parser.parse_args()

    start = time.perf_counter()
    data = ticks(args.ticks, args.tokens)
    gen_s = time.perf_counter() - start
    start = time.perf_counter()
    for t in data:
        encode_tick(t)
    enc_s = time.perf_counter() - start
    with EmbeddedBroker() as broker:
        kafka_s = asyncio.run(through_kafka(data, broker.bootstrap_servers))
    n = args.ticks
    print(f"ticks: {n}, tokens: {args.tokens}")
    print(f"generate (pure):          {n / gen_s:12,.0f} ticks/s")
    print(f"encode_tick:              {n / enc_s:12,.0f} ticks/s")
    print(f"publish + flush (Tansu):  {n / kafka_s:12,.0f} ticks/s  ({kafka_s:.2f} s)")


if __name__ == "__main__":
    main()
