"""The monitor daemon's per-batch work in one process, no broker: for callgrind A/B.

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \\
        python benchmarks/monitor_loop.py --mode daemon --ticks 60000 --spacing 1
    python benchmarks/monitor_loop.py --mode daemon --digest     # what was appended

Wall-clock rates of ``bench_monitor.py`` move by more than a per-tick change of a few
percent on a shared machine; instruction counts do not. This feeds the records of
``monitor_ticks.synthetic`` (the table's ticks: ``--tokens`` tokens, one tick each every
``--spacing`` seconds, keyed ``chain:token``), partitioned as the producer would (murmur2
over ``--partitions``) and handed out in batches of ``--batch`` records of one partition
at a time, as aiokafka's ``getmany`` drains its fetched partitions, through
``MonitorDaemon._process`` with the real ``OutputWriter``, ``Publisher`` and aiokafka's
``BatchBuilder`` (each batch built, so compressed, as the producer's sender would) over a
stub producer that acknowledges at once. The daemon's ``[gc]`` policy is applied after
set-up, as the daemon applies it once it has joined. Modes:

- ``setup``: everything but the feeding (subtract it from the others);
- ``decode``: ``decode_tick`` of every record (the bare consumer's own work);
- ``engine``: decode, then ``Engine.take`` with the key and the offset (the least any
  daemon does with a tick);
- ``daemon``: ``_process`` (and ``_checkpoint`` every ``--checkpoint-every`` ticks).

``--digest`` prints a SHA-256 over every record appended to a batch or sent alone (topic,
partition, key, value, headers, in order) and every commit (a state's ``written_at`` is
then a constant): equal on two trees means the same bytes and offsets.
``--time`` prints the feeding's CPU time per tick (rough; use callgrind for A/B).
``--bytecodes TOP`` counts the bytecodes the timed ticks run, per tick, with the TOP
functions and source lines (``bytecodes.py``; seconds, where callgrind takes minutes, and
by line; the pure build only).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner
from aiokafka.structs import ConsumerRecord
from bytecodes import Bytecodes, Counting
from monitor_ticks import synthetic

from monitor.config import Config, KafkaConfig, ModelConfig
from monitor.daemon import MonitorDaemon, checkpoint
from monitor.daemon.outputs import OutputWriter
from monitor.daemon.partitions import PartitionState
from monitor.daemon.publisher import Publisher
from monitor.gcpolicy import apply_gc_policy
from monitor.logs import configure_logging
from monitor.ticks import decode_tick


class DigestBuilder:
    """aiokafka's BatchBuilder, noting what is appended."""

    def __init__(self, inner: Any, seen: list[tuple[Any, ...]]) -> None:
        self._inner = inner
        self._seen = seen

    def append(self, *, timestamp: Any, key: bytes | None, value: bytes | None,
               headers: Any = ()) -> Any:
        meta = self._inner.append(timestamp=timestamp, key=key, value=value, headers=headers)
        if meta is not None:
            self._seen.append((key, value, tuple(headers)))
        return meta


class StubProducer:
    """What ``Publisher`` calls of ``AIOKafkaProducer``; every send acknowledged at once."""

    def __init__(self, real: AIOKafkaProducer, partitions: int, digest: bool) -> None:
        self._real = real
        self._partitions = set(range(partitions))
        self._digest = hashlib.sha256() if digest else None

    async def partitions_for(self, topic: str) -> set[int]:
        return self._partitions

    def create_batch(self) -> Any:
        builder = self._real.create_batch()
        return DigestBuilder(builder, []) if self._digest is not None else builder

    def _done(self) -> asyncio.Future[object]:
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    async def send_batch(self, builder: Any, topic: str, *, partition: int
                         ) -> asyncio.Future[object]:
        if isinstance(builder, DigestBuilder):
            assert self._digest is not None
            for key, value, headers in builder._seen:
                self._note(topic, partition, key, value, headers)
            builder = builder._inner
        builder._build()  # the sender's work: the batch compressed and checksummed
        return self._done()

    async def send(self, topic: str, value: bytes | None, *, key: bytes | None = None,
                   partition: int | None = None, headers: Any = None
                   ) -> asyncio.Future[object]:
        if self._digest is not None:
            self._note(topic, partition, key, value, tuple(headers or ()))
        return self._done()

    def _note(self, topic: str, partition: int | None, key: bytes | None,
              value: bytes | None, headers: Any) -> None:
        assert self._digest is not None
        self._digest.update(repr((topic, partition, key, value, headers)).encode())

    def reset(self) -> None:
        """Forget what the warm-up sent: the digest covers the timed ticks only."""
        if self._digest is not None:
            self._digest = hashlib.sha256()

    def hexdigest(self) -> str:
        return self._digest.hexdigest() if self._digest is not None else "-"


class StubConsumer:
    """What the loop and the checkpoint call of the consumer; commits go into the digest."""

    def __init__(self, ends: dict[int, int], producer: StubProducer) -> None:
        self._ends = ends
        self._producer = producer

    def highwater(self, tp: TopicPartition) -> int | None:
        return self._ends.get(tp.partition)

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        if self._producer._digest is not None:
            self._producer._digest.update(repr(sorted(
                (tp.partition, o) for tp, o in offsets.items())).encode())


def batches(records: list[tuple[bytes, bytes]], topic: str, partitions: int, size: int,
            first: dict[int, int] | None = None
            ) -> tuple[list[dict[TopicPartition, list[Any]]], dict[int, int]]:
    """The records as ConsumerRecords, per partition in offset order (from ``first``'s
    offset, else 0), in batches of ``size`` of one partition at a time, the partitions in
    turn; and each partition's offset after its last record."""
    partitioner = DefaultPartitioner()
    every = list(range(partitions))
    base = first or dict.fromkeys(every, 0)
    per: dict[int, list[Any]] = {p: [] for p in every}
    for key, value in records:
        p = partitioner(key, every, every)
        recs = per[p]
        recs.append(ConsumerRecord(topic, p, base[p] + len(recs), 0, 0, key, value, None,
                                   len(key), len(value), ()))
    out: list[dict[TopicPartition, list[Any]]] = []
    start = dict.fromkeys(every, 0)
    while any(start[p] < len(per[p]) for p in every):
        for p in every:
            if start[p] < len(per[p]):
                out.append({TopicPartition(topic, p): per[p][start[p]:start[p] + size]})
                start[p] += size
    return out, {p: base[p] + len(per[p]) for p in every}


async def run(args: argparse.Namespace) -> None:
    model = ModelConfig() if args.lateness is None else ModelConfig(
        lateness_seconds=args.lateness)
    config = Config(model=model, kafka=KafkaConfig(partitions=args.partitions))
    k = config.kafka
    records = synthetic(args.warmup + args.ticks, args.tokens, spacing=args.spacing)
    warm, ends = batches(records[:args.warmup], k.ticks_topic, args.partitions, args.batch)
    feed, ends = batches(records[args.warmup:], k.ticks_topic, args.partitions, args.batch,
                         ends)
    daemon = MonitorDaemon(config)
    real = AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", acks="all",
                            enable_idempotence=False,
                            compression_type=None if k.compression == "none" else k.compression,
                            linger_ms=k.linger_ms, max_batch_size=k.producer_batch_bytes)
    stub = StubProducer(real, args.partitions, args.digest)
    publisher = Publisher(stub, daemon._broker.backoff(),  # type: ignore[arg-type,unused-ignore]
                          daemon._broker.abort, daemon.readiness.failure,
                          daemon.readiness.recovery)
    daemon._out = OutputWriter(k, publisher, daemon.stats)
    daemon._consumer = StubConsumer(ends, stub)  # type: ignore[assignment,unused-ignore]
    for p in range(args.partitions):
        part = PartitionState.restore(p, config.model, 0, {}, daemon._spread_gated or
                                      frozenset())
        part.committed = 0
        daemon._parts[p] = part
    if args.digest:  # a state record's written_at: the same on every run
        vars(checkpoint)["time"] = SimpleNamespace(time=lambda: 1_700_000_000.0,
                                                   monotonic=time.monotonic)
    if warm:  # fed as the timed ticks are, before the timing (and any digest) starts
        for batch in warm:
            if args.mode == "daemon":
                await daemon._process(batch, 0)
            elif args.mode == "engine":
                for tp, recs in batch.items():
                    take = daemon._parts[tp.partition].engine.take
                    for rec in recs:
                        tick = decode_tick(rec.value)
                        take(tick, tick.key, rec.offset, [])
        if args.mode == "daemon":
            await publisher.flush()
        stub.reset()
    apply_gc_policy(config.gc)
    counter: AbstractContextManager[Bytecodes | None] = \
        Counting() if args.bytecodes else nullcontext()
    started = time.process_time()
    mode = args.mode
    with counter as counts:
        if mode == "decode":
            for batch in feed:
                for recs in batch.values():
                    for rec in recs:
                        decode_tick(rec.value)
        elif mode == "engine":
            out: list[Any] = []
            for batch in feed:
                for tp, recs in batch.items():
                    take = daemon._parts[tp.partition].engine.take
                    for rec in recs:
                        tick = decode_tick(rec.value)
                        take(tick, tick.key, rec.offset, out)
                    out.clear()
        elif mode == "daemon":
            fed = 0
            every = args.checkpoint_every
            for batch in feed:
                await daemon._process(batch, 0)
                if every:
                    fed += sum(map(len, batch.values()))
                    if fed >= every:
                        fed = 0
                        await daemon._checkpoint(list(daemon._parts))
    elapsed = time.process_time() - started
    if mode == "daemon":
        await publisher.flush()
    s = daemon.stats
    print(f"mode {mode}: {args.ticks} ticks, {args.tokens} tokens, spacing {args.spacing}s; "
          f"ticks {s.ticks} ratings {s.ratings} tier changes {s.tier_changes} dead letters "
          f"{s.dead_letters} checkpoints {s.checkpoints}")
    if args.digest:
        print(f"digest {stub.hexdigest()}")
    if args.time:
        print(f"cpu {elapsed / args.ticks * 1e6:.3f} us/tick (gc counts {gc.get_count()})")
    if counts is not None:
        print(counts.report(per=args.ticks, top=args.bytecodes))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["setup", "decode", "engine", "daemon"],
                        default="daemon")
    parser.add_argument("--ticks", type=int, default=60_000)
    parser.add_argument("--warmup", type=int, default=0,
                        help="ticks fed before the timed ones, untimed and outside the digest "
                             "(e.g. 420000 at --spacing 1: every timed tick is then applied "
                             "as in a running monitor, not only held for lateness)")
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--spacing", type=int, default=1,
                        help="seconds between a token's ticks: 1 (the 1/s row) or 60")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--batch", type=int, default=2000, help="records per batch")
    parser.add_argument("--checkpoint-every", type=int, default=0,
                        help="a checkpoint after this many ticks (0: none; at the table's "
                             "rates a 5 s interval falls at most once in a row's window)")
    parser.add_argument("--lateness", type=int, default=None,
                        help="model.lateness_seconds (default: the model's): 0 applies each "
                             "tick as it is taken, nothing held")
    parser.add_argument("--digest", action="store_true")
    # Exclusive: tracing slows the timed ticks about a hundredfold.
    measure = parser.add_mutually_exclusive_group()
    measure.add_argument("--time", action="store_true")
    measure.add_argument("--bytecodes", type=int, default=0, metavar="TOP",
                        help="count the bytecodes the timed ticks run (bytecodes.py; pure "
                             "build: DEPEG_MONITOR_COMPILED=off) and print their number per "
                             "tick, the TOP functions and the TOP source lines")
    args = parser.parse_args()
    configure_logging(level="warning", fmt="console")
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
