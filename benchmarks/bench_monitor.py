"""Throughput of the monitor daemon against a bare consumer, on the same topic, one run.

    python benchmarks/bench_monitor.py --table [--ticks 100000] [--tokens 1000]
        [--rows minute,second] [--snapshot-seconds 0] [--checkpoint-interval 5]
        [--state-every-ticks 32] [--state-max-age 900]
        [--compression zstd] [--compiled]

``--table`` (the README's rows): per row, an embedded Tansu broker, synthetic ticks
(random walks around a 1.0 peg, keyed ``chain:token``; one tick per token per minute, or
per second) published once, then for ``--rounds`` rounds in rotating order:

1. a bare aiokafka consumer reads every record and only decodes it (``decode_tick``): the
   limit;
2. the monitor daemon (engine, rating snapshots, tier changes, state checkpoints, offset
   commits; acks=all) in its own group with its own output and state topics;
3. Quix Streams (only when installed: ``pip install -e '.[bench]'``), one tumbling 5-minute
   mean of the price per token over the same topic, in a child process: the peer.

Every side first reads a warm-up of ``--warmup-seconds`` of event time per token
(``monitor_ticks.warmup_seconds``), untimed, and is then timed over the row's ticks, to
its last (the rate and this process's CPU per tick): what the ticks cost a monitor that
has been running, every tick taken also applied. Printed: min/median/max per side, the
ratio of the medians (targets 0.5 at 1/min, 0.7 at 1/s), each side's CPU per tick and
busy share (CPU seconds per second of wall: what is left of 1, it waited), and the bytes
the monitor wrote to its state and ratings topics per byte of ticks in (target <= 1), for
this replay-speed run and as estimated for real time with the configured checkpoint
interval and due policy (``kafka.state_every_ticks``, ``state_max_age_seconds``: the
daemon's own ``monitor/daemon/coverage.py`` driven by a simulated clock decides which
tokens write a state at each checkpoint). Dead letters of these valid ticks count as
errors (exit 1). Without ``--table``: one quick run per token count with ``engine/s``
(decode + ``Engine.process`` alone, no Kafka: the daemon's ceiling).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiokafka import AIOKafkaConsumer, TopicPartition
from monitor_bytes import bytes_row, topic_records
from monitor_peer import quix_available, quix_round
from monitor_ticks import produce, synthetic, warmup_seconds

from monitor.config import Config, KafkaConfig, ModelConfig
from monitor.daemon import MonitorDaemon
from monitor.kafka.batches import stored_batches
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics
from monitor.logs import configure_logging
from monitor.ticks import decode_tick


class Timed(msgspec.Struct):
    """What one round measured once past its warm-up: ticks/s and CPU seconds per tick of
    this process over the timed ticks only."""

    rate: float
    cpu: float


async def bare_consumer(bootstrap: str, topic: str, total: int, batch: int,
                        warm: int = 0) -> Timed:
    """Reads ``total`` records and decodes each; timed from the first fetch that takes it
    past ``warm`` records (the same warm-up the monitor gets) to the last."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        await consumer.topics()
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        started, cpu_started, at = time.perf_counter(), time.process_time(), 0
        seen = 0
        timing = warm <= 0
        while seen < total:
            got = await consumer.getmany(timeout_ms=200, max_records=batch)
            for records in got.values():
                for rec in records:
                    decode_tick(rec.value)
                    seen += 1
            if not timing and seen >= warm:
                timing = True
                started, cpu_started, at = time.perf_counter(), time.process_time(), seen
        return Timed((seen - at) / (time.perf_counter() - started),
                     (time.process_time() - cpu_started) / (seen - at))
    finally:
        await consumer.stop()


async def monitor(config: Config, total: int,
                  gc_time: contextlib.AbstractContextManager[Any] | None = None,
                  warm: int = 0) -> tuple[Timed, MonitorDaemon]:
    """One daemon over ``total`` ticks, timed from the poll that finds it past ``warm``
    ticks (at once when 0: from the moment it holds its partitions) to its last tick;
    ``gc_time`` (a :class:`common.GcTimer`) is entered for exactly that window."""
    daemon = MonitorDaemon(config, check_name=f"bench-{config.kafka.monitor_group}")
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))

    async def until(count: int) -> None:
        while daemon.stats.ticks < count:  # a counter, not an event: poll it
            if task.done():
                task.result()
                raise RuntimeError("monitor stopped early")
            await asyncio.sleep(0.005)

    await daemon.joined.wait()  # nothing is timed before it holds its partitions
    await until(warm)
    with gc_time or contextlib.nullcontext():
        started, cpu_started, at = time.perf_counter(), time.process_time(), daemon.stats.ticks
        if at >= total:  # one batch took the warm-up's end and every timed tick with it
            stop.set()
            await task
            raise RuntimeError(f"the monitor had taken all {total:,} ticks when the warm-up "
                               "ended: nothing left to time (use more --ticks)")
        await until(total)
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
    stop.set()
    await task
    return Timed((total - at) / elapsed, cpu / (total - at)), daemon


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
        bare = (await bare_consumer(bootstrap, kafka.ticks_topic, n_ticks,
                                    kafka.batch_max_records)).rate
        print("  bare consumer done", file=sys.stderr, flush=True)
        timed, daemon = await monitor(config, n_ticks)
        mon = timed.rate
        s = daemon.stats
        return {"tokens": n_tokens, "ticks": n_ticks, "produce": produce_rate, "bare": bare,
                "engine": engine_only(records),
                "monitor": mon, "ratio": mon / bare, "ratings": s.ratings,
                "tier_changes": s.tier_changes, "checkpoints": s.checkpoints}


class Row(msgspec.Struct):
    """One table row's input: ``tokens`` tokens, one tick each every ``spacing`` seconds;
    ``warm`` ticks first (read by every side, never timed), then the ``ticks`` timed."""

    name: str
    spacing: int
    ticks: int
    warm: int = 0

    @property
    def total(self) -> int:
        return self.warm + self.ticks


async def table_rounds(rows: list[Row], n_tokens: int, partitions: int, rounds: int,
                       config: Config, no_peer: bool = False, variant: str = "") -> int:
    """The README table's rows: per row one broker, its ticks published once, then the
    bare consumer, the monitor (and Quix Streams when installed) in rotating order for
    ``rounds`` rounds; each monitor round gets its own group and output/state topics, so
    none restores another's state. ``variant`` (:func:`settings_variant`) names the
    monitor's settings in the rows when they are not the table's. Returns the error
    count."""
    from common import GcTimer, emit, machine_line, show

    print(machine_line())
    errors = 0
    compiled = engine_compiled()
    label = (" (mypyc build)" if compiled else "") + (f" ({variant})" if variant else "")
    # The peer and the bytes rows do not depend on the build: the pure run gives them.
    peer = quix_available() and not compiled and not no_peer
    # The slowest row's state records: its tokens' rings are the fullest (a short run at one
    # tick a second covers minutes of event time, its states are far below steady size).
    full_states: list[bytes] = []
    for row in rows:
        print(f"{row.name}: {row.ticks:,} ticks timed after {row.warm:,} of warm-up, "
              f"{n_tokens:,} tokens, one tick per token every {row.spacing}s", flush=True)
        with EmbeddedBroker() as broker:
            bootstrap = broker.bootstrap_servers
            base = msgspec.structs.replace(config.kafka, bootstrap_servers=bootstrap,
                                           partitions=partitions, client_id="bench")
            await ensure_topics(base)
            records = synthetic(row.total, n_tokens, spacing=row.spacing)
            await produce(bootstrap, base.ticks_topic, records)
            ticks_bytes = sum(len(k) + len(v) for k, v in records)
            bare: list[float] = []
            mon: list[float] = []
            quix: list[float] = []
            ratios: list[float] = []
            state_records: list[list[bytes]] = []
            rating_records: list[list[bytes]] = []
            # CPU seconds of this process per tick (the broker is a child, Quix another):
            # moves far less with the machine's load than the rates.
            cpu: dict[str, list[float]] = {"bare": [], "monitor": []}
            kinds = ["bare", "monitor"] + (["quix"] if peer else [])
            for n in range(rounds):
                kafka = msgspec.structs.replace(
                    base, monitor_group=f"bench-{n}", ratings_topic=f"bench.ratings.{n}",
                    tier_changes_topic=f"bench.tier-changes.{n}",
                    state_topic=f"bench.state.{n}", dlq_topic=f"bench.dlq.{n}")
                await ensure_topics(kafka)
                for which in kinds[n % len(kinds):] + kinds[:n % len(kinds)]:
                    if which == "bare":
                        timed = await bare_consumer(bootstrap, base.ticks_topic, row.total,
                                                    base.batch_max_records, row.warm)
                        bare.append(timed.rate)
                        figure = bare[-1]
                        cpu["bare"].append(timed.cpu)
                    elif which == "quix":
                        quix.append(await asyncio.to_thread(
                            quix_round, bootstrap, base.ticks_topic, f"quix-{n}", row.total,
                            row.warm))
                        figure = quix[-1]
                    else:
                        gc_time = GcTimer()
                        timed, daemon = await monitor(
                            msgspec.structs.replace(config, kafka=kafka), row.total, gc_time,
                            row.warm)
                        print(f"    {gc_time.line(row.ticks / timed.rate)}", flush=True)
                        mon.append(timed.rate)
                        cpu["monitor"].append(timed.cpu)
                        figure = timed.rate
                        errors += daemon.stats.dead_letters
                        state = await stored_batches(bootstrap, kafka.state_topic)
                        ratings = await stored_batches(bootstrap, kafka.ratings_topic)
                        ratios.append((state.bytes + ratings.bytes) / ticks_bytes)
                        state_records.append(
                            await topic_records(bootstrap, kafka.state_topic, partitions))
                        rating_records.append(
                            await topic_records(bootstrap, kafka.ratings_topic, partitions))
                        plain = sum(map(len, state_records[-1] + rating_records[-1]))
                        print(f"    on the broker ({kafka.compression}): state "
                              f"{state.records:,} records {state.bytes:,} B, ratings "
                              f"{ratings.records:,} records {ratings.bytes:,} B; ticks "
                              f"{ticks_bytes:,} B: {ratios[-1]:.3f} B written per B in "
                              f"({plain / ticks_bytes:.3f} uncompressed); dead letters "
                              f"{daemon.stats.dead_letters}", flush=True)
                    print(f"  round {n + 1} {which:<7} {figure:9.0f} ticks/s", flush=True)
        print(show("bare aiokafka + msgspec decode", bare, "ticks/s"))
        print(show("monitor daemon", mon, "ticks/s"))
        target = 0.5 if row.spacing >= 60 else 0.7
        ratio = statistics.median(mon) / statistics.median(bare)
        print(f"monitor / bare consumer (medians): {ratio:.3f}  (target >= {target})")
        cpu_bare, cpu_mon = (statistics.median(cpu["bare"]) * 1e6,
                             statistics.median(cpu["monitor"]) * 1e6)
        print(f"CPU per tick (medians, the timed ticks): bare "
              f"{cpu_bare:.1f} us, monitor {cpu_mon:.1f} us, bare/monitor "
              f"{cpu_bare / cpu_mon:.3f}", flush=True)
        # Busy: CPU seconds per second of wall, a round's CPU per tick times its rate.
        # What is left of 1 is the loop waiting (on a fetch, or on the producer's queue
        # of one batch per partition): the most that overlapping the monitor's waits
        # with its work (a background publisher) could win.
        busy_bare, busy_mon = (
            statistics.median([c * r for c, r in zip(cpu[side], rates, strict=True)])
            for side, rates in (("bare", bare), ("monitor", mon)))
        print(f"busy (CPU seconds per second of wall, medians): bare {busy_bare:.2f}, "
              f"monitor {busy_mon:.2f}", flush=True)
        note = ("Quix Streams: in the pure-Python run" if compiled
                else "no Quix Streams peer (--no-peer)" if no_peer
                else "no Quix Streams peer (not installed)")
        if quix:
            print(show("Quix Streams tumbling mean", quix, "ticks/s"))
            q = statistics.median(quix) / statistics.median(bare)
            print(f"Quix Streams / bare consumer (medians): {q:.3f}")
            note = f"Quix Streams tumbling mean: {q:.2f} of the same limit"
        emit(f"live monitor, {n_tokens:,} tokens, 1 tick per token per {row.name}, "
             f"{row.ticks:,} synthetic ticks timed after {row.warm:,} of warm-up{label}",
             unit="ticks/s",
             limit_name="bare aiokafka + msgspec decode-only consumer",
             limit=bare, project=mon, ratio=ratio, target=f">= {target}",
             met=ratio >= target,
             note=f"{note}; CPU per tick bare/monitor {cpu_bare / cpu_mon:.2f}; busy "
                  f"bare/monitor {busy_bare:.2f}/{busy_mon:.2f}")
        if quix:
            emit(f"peer: Quix Streams, one tumbling 5-minute mean, 1 tick per token per "
                 f"{row.name}", unit="ticks/s",
                 limit_name="bare aiokafka + msgspec decode-only consumer", limit=bare,
                 project=quix, ratio=statistics.median(quix) / statistics.median(bare),
                 target="peer (no target)", met=True)
        if compiled:
            continue
        bytes_row(row.name + label, row.total, row.spacing, n_tokens, partitions, config,
                  ticks_bytes, state_records[-1], rating_records[-1], ratios, full_states)
        if not full_states:
            full_states = state_records[-1]
    return errors


def settings_variant(config: Config) -> str:
    """The monitor's settings that differ from the defaults the table's rows are taken
    with, as words for the rows' names ("" when none): a row measured with a rating
    snapshot every 15 minutes, say, must not read as the row of the table."""
    model, kafka = ModelConfig(), KafkaConfig()
    parts = []
    if config.model.snapshot_seconds != model.snapshot_seconds:
        parts.append(f"a rating snapshot every {config.model.snapshot_seconds} s")
    for name in ("checkpoint_interval_seconds", "state_every_ticks", "state_max_age_seconds",
                 "compression"):
        if getattr(config.kafka, name) != getattr(kafka, name):
            parts.append(f"kafka.{name} {getattr(config.kafka, name)}")
    if not config.gc.enabled:
        parts.append("gc policy off")
    return ", ".join(parts)


def engine_compiled() -> bool:
    """Whether this process runs the optional mypyc build of the engine."""
    import monitor.engine.engine as engine_module

    return str(engine_module.__file__).endswith(".so")


def rerun_compiled() -> int:
    """This script again, with the same arguments, in a child running the optional mypyc
    build (the one ``DEPEG_MONITOR_COMPILED`` names, else built now into a temporary
    directory): the engine is chosen at import, so it cannot change in this process."""
    from common import compiled_env

    with tempfile.TemporaryDirectory() as tmp:
        env = compiled_env(tmp)
        return 1 if env is None else _again(env)


def rerun_pure() -> int:
    """This script again, with the same arguments, in a child running the sources: a build
    in the data directory (``depeg-monitor compile``) is loaded by default, and the rows
    without ``--compiled`` are the pure-Python ones."""
    from monitor.compiled import ENV, OFF

    return _again({**os.environ, ENV: OFF})


def _again(env: dict[str, str]) -> int:
    """This script with the same arguments in a child with ``env``; its exit status."""
    return subprocess.run([sys.executable, __file__, *sys.argv[1:]], env=env,
                          check=False).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ticks", type=int, default=100_000,
                        help="ticks of the one-a-minute row (and of the non-table run)")
    parser.add_argument("--ticks-per-second-row", type=int, default=300_000,
                        help="timed ticks of the one-a-second row (default: 300 s of event "
                             "time for 1,000 tokens, one refresh period)")
    parser.add_argument("--warmup-seconds", type=float, default=-1.0,
                        help="event seconds per token read before the timing starts, by "
                             "every side (<0: per row, see warmup_seconds; 0: none)")
    parser.add_argument("--tokens", default="1000,10000")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--table", action="store_true",
                        help="the README table's rows: interleaved rounds, BENCH-RESULT lines")
    parser.add_argument("--rows", default="minute,second",
                        help="table rows: minute (1 tick/token/min), second (1/s)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--snapshot-seconds", type=int, default=0,
                        help="model.snapshot_seconds of the monitor (0: every refresh)")
    parser.add_argument("--checkpoint-interval", type=float,
                        default=KafkaConfig().checkpoint_interval_seconds,
                        help="kafka.checkpoint_interval_seconds of the monitor")
    parser.add_argument("--state-every-ticks", type=int, default=0,
                        help="kafka.state_every_ticks of the monitor (0: the default)")
    parser.add_argument("--state-max-age", type=float, default=-1.0,
                        help="kafka.state_max_age_seconds of the monitor (<0: the default)")
    parser.add_argument("--compression", default=KafkaConfig().compression,
                        choices=["zstd", "lz4", "snappy", "gzip", "none"],
                        help="kafka.compression of the monitor's outputs")
    parser.add_argument("--no-peer", action="store_true",
                        help="no Quix Streams rounds even when installed (quicker A/B runs)")
    parser.add_argument("--gc", choices=["on", "off"], default="on",
                        help="the monitor's [gc] policy (monitor/gcpolicy.py): on = the "
                             "defaults, off = gc.enabled false (CPython's thresholds)")
    parser.add_argument("--compiled", action="store_true",
                        help="the monitor from the optional mypyc build (monitor/compiled.py; "
                             "built once into a temporary directory unless "
                             "DEPEG_MONITOR_COMPILED names one): rows named (mypyc build)")
    args = parser.parse_args()
    if args.compiled and not engine_compiled():
        return rerun_compiled()
    if not args.compiled and engine_compiled():
        return rerun_pure()
    # SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the broker child is stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    configure_logging(level=os.environ.get("BENCH_LOG", "warning"), fmt="console")
    if args.table:
        n_tokens = int(args.tokens.split(",")[0])
        # Only a non-default cadence is passed, so this script also measures older code.
        model = (ModelConfig(snapshot_seconds=args.snapshot_seconds) if args.snapshot_seconds
                 else ModelConfig())
        cadence: dict[str, Any] = {}
        if args.state_every_ticks:
            cadence["state_every_ticks"] = args.state_every_ticks
        if args.state_max_age >= 0:
            cadence["state_max_age_seconds"] = args.state_max_age
        config = Config(model=model,
                        kafka=KafkaConfig(checkpoint_interval_seconds=args.checkpoint_interval,
                                          compression=args.compression, **cadence))
        if args.gc == "off":  # through the config, as a user turns it off
            config = msgspec.structs.replace(
                config, gc=msgspec.structs.replace(config.gc, enabled=False))
        def row(name: str, spacing: int, ticks: int) -> Row:
            seconds = (warmup_seconds(config.model, spacing) if args.warmup_seconds < 0
                       else args.warmup_seconds)
            return Row(name, spacing, ticks, warm=n_tokens * math.ceil(seconds / spacing))

        known = {"minute": row("minute", 60, args.ticks),
                 "second": row("second", 1, args.ticks_per_second_row or args.ticks)}
        rows = [known[name] for name in args.rows.split(",")]
        errors = asyncio.run(table_rounds(rows, n_tokens, args.partitions, args.rounds,
                                          config, args.no_peer, settings_variant(config)))
        from common import fail_on_errors

        fail_on_errors(errors, "the monitor rounds (dead letters of valid ticks)")
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
