"""Throughput of the monitor daemon against a bare consumer, on the same topic, one run.

    python benchmarks/bench_monitor.py [--ticks 100000] [--tokens 1000,10000]

For each token count: start an embedded Tansu broker, produce ``--ticks`` synthetic ticks
(random walks around a 1.0 peg, one-minute spacing per token, keyed ``chain:token``) to a
fresh ticks topic, then

1. a bare aiokafka consumer reads every record and only decodes it (``decode_tick``);
2. the monitor daemon (engine, rating snapshots, tier changes, state checkpoints, offset
   commits; acks=all) consumes the same topic from the beginning in its own group.

Both are timed from the moment they hold their partitions to the last tick processed.
The ratio monitor/bare is the figure of merit (target >= 0.5). ``engine/s`` is decode +
``Engine.process`` alone, without Kafka: the ceiling for the daemon on one core.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from monitor.chains import CHAINS
from monitor.config import Config, KafkaConfig
from monitor.daemon import MonitorDaemon
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics
from monitor.logs import configure_logging
from monitor.ticks import decode_tick, encode_tick, make_tick


def synthetic(n_ticks: int, n_tokens: int, seed: int = 7) -> list[tuple[bytes, bytes]]:
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
        tick = make_tick(t0 + 60 * step, chain, token, f"T{j}", f"{prices[j]:.6f}", "1")
        out.append((tick.key.encode(), encode_tick(tick)))
    return out


async def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> float:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20,
                                enable_idempotence=False, max_batch_size=256 * 1024)
    await producer.start()
    started = time.perf_counter()
    try:
        futures = []
        for key, value in records:
            futures.append(await producer.send(topic, value, key=key))
            if len(futures) >= 20000:
                await asyncio.gather(*futures)
                futures.clear()
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return len(records) / (time.perf_counter() - started)


async def bare_consumer(bootstrap: str, topic: str, total: int, batch: int) -> float:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        await consumer.topics()
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        started = time.perf_counter()
        seen = 0
        while seen < total:
            got = await consumer.getmany(timeout_ms=200, max_records=batch)
            for records in got.values():
                for rec in records:
                    decode_tick(rec.value)
                    seen += 1
        return seen / (time.perf_counter() - started)
    finally:
        await consumer.stop()


async def monitor(config: Config, total: int) -> tuple[float, MonitorDaemon]:
    daemon = MonitorDaemon(config, check_name=f"bench-{config.kafka.monitor_group}")
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    await daemon.joined.wait()  # timing starts once it holds its partitions
    started = time.perf_counter()
    while daemon.stats.ticks < total:  # a counter, not an event: poll it
        if task.done():
            task.result()
            raise RuntimeError("monitor stopped early")
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - started
    stop.set()
    await task
    return total / elapsed, daemon


def engine_only(records: list[tuple[bytes, bytes]]) -> float:
    """decode + engine, no Kafka at all: the ceiling the daemon can approach."""
    from monitor.engine import Engine

    engine = Engine()
    started = time.perf_counter()
    for _, value in records:
        engine.process(decode_tick(value))
    return len(records) / (time.perf_counter() - started)


async def one_run(n_ticks: int, n_tokens: int, partitions: int) -> dict[str, float]:
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        kafka = KafkaConfig(bootstrap_servers=bootstrap, partitions=partitions,
                            monitor_group=f"bench-{n_tokens}", client_id="bench")
        config = Config(kafka=kafka)
        await ensure_topics(kafka)
        records = synthetic(n_ticks, n_tokens)
        produce_rate = await produce(bootstrap, kafka.ticks_topic, records)
        print(f"  produced {n_ticks} ticks for {n_tokens} tokens", file=sys.stderr, flush=True)
        bare = await bare_consumer(bootstrap, kafka.ticks_topic, n_ticks, kafka.batch_max_records)
        print("  bare consumer done", file=sys.stderr, flush=True)
        mon, daemon = await monitor(config, n_ticks)
        s = daemon.stats
        return {"tokens": n_tokens, "ticks": n_ticks, "produce": produce_rate, "bare": bare,
                "engine": engine_only(records),
                "monitor": mon, "ratio": mon / bare, "ratings": s.ratings,
                "tier_changes": s.tier_changes, "checkpoints": s.checkpoints}


async def table_rounds(n_ticks: int, n_tokens: int, partitions: int, rounds: int) -> None:
    """The README table's row: one broker, the ticks published once, then the bare
    consumer and the monitor alternately for ``rounds`` rounds; each monitor round gets
    its own group and output/state topics, so none restores another's state."""
    import msgspec
    from common import emit, machine_line, show

    print(machine_line())
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        base = KafkaConfig(bootstrap_servers=bootstrap, partitions=partitions, client_id="bench")
        await ensure_topics(base)
        records = synthetic(n_ticks, n_tokens)
        await produce(bootstrap, base.ticks_topic, records)
        bare: list[float] = []
        mon: list[float] = []
        for n in range(rounds):
            kafka = msgspec.structs.replace(
                base, monitor_group=f"bench-{n}", ratings_topic=f"bench.ratings.{n}",
                tier_changes_topic=f"bench.tier-changes.{n}", state_topic=f"bench.state.{n}",
                dlq_topic=f"bench.dlq.{n}")
            await ensure_topics(kafka)
            for which in ("bare", "monitor") if n % 2 == 0 else ("monitor", "bare"):
                if which == "bare":
                    bare.append(await bare_consumer(bootstrap, base.ticks_topic, n_ticks,
                                                    base.batch_max_records))
                else:
                    mon.append((await monitor(Config(kafka=kafka), n_ticks))[0])
                print(f"  round {n + 1} {which:<7} "
                      f"{(bare if which == 'bare' else mon)[-1]:9.0f} ticks/s", flush=True)
    print(show("bare aiokafka + msgspec decode", bare, "ticks/s"))
    print(show("monitor daemon", mon, "ticks/s"))
    ratio = statistics.median(mon) / statistics.median(bare)
    print(f"monitor / bare consumer (medians): {ratio:.3f}  (target >= 0.5)")
    # Both read until they have seen every tick (a lost tick would never finish): no
    # error count beyond that; a monitor that stops early raises.
    emit(f"live monitor, {n_tokens:,} tokens, {n_ticks:,} synthetic 1-minute ticks",
         unit="ticks/s", limit_name="bare aiokafka + msgspec decode-only consumer",
         limit=bare, project=mon, ratio=ratio, target=">= 0.5", met=ratio >= 0.5,
         note="no Quix Streams peer")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ticks", type=int, default=100_000)
    parser.add_argument("--tokens", default="1000,10000")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--table", action="store_true",
                        help="the README table's row: interleaved rounds, BENCH-RESULT line")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    # SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the broker child is stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    configure_logging(level=os.environ.get("BENCH_LOG", "warning"), fmt="console")
    if args.table:
        n_tokens = int(args.tokens.split(",")[0])
        asyncio.run(table_rounds(args.ticks, n_tokens, args.partitions, args.rounds))
        return 0
    print(f"{'tokens':>7} {'ticks':>8} {'produce/s':>10} {'bare/s':>9} {'engine/s':>9} "
          f"{'monitor/s':>10} "
          f"{'ratio':>6} {'ratings':>8} {'changes':>8} {'ckpts':>6}")
    for n_tokens in (int(x) for x in args.tokens.split(",")):
        r = asyncio.run(one_run(args.ticks, n_tokens, args.partitions))
        print(f"{r['tokens']:>7} {r['ticks']:>8} {r['produce']:>10.0f} {r['bare']:>9.0f} "
              f"{r['engine']:>9.0f} "
              f"{r['monitor']:>10.0f} {r['ratio']:>6.2f} {r['ratings']:>8} "
              f"{r['tier_changes']:>8} {r['checkpoints']:>6}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
