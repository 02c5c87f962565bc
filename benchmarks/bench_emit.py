"""What one rating snapshot costs the monitor daemon after the engine made it: encoding,
the record batch, compression.

    python benchmarks/bench_emit.py [--tokens 1000] [--ticks 30000] [--rounds 5]
                                    [--batch-bytes 524288]

The snapshots are the live-monitor table's at 1 tick per token per minute (the ticks of
``monitor_ticks.synthetic`` through ``Engine.take``, a snapshot every 5 minutes of event
time per token). Then, alternately for ``--rounds`` rounds, CPU µs per snapshot of:

- ``encode``: ``records.ENCODER.encode`` (the exact bytes the daemon publishes);
- ``batch``: aiokafka's ``BatchBuilder``, each encoded snapshot appended with its
  ``chain:token`` key, every batch built uncompressed (what ``Publisher.send_all`` does),
  batches of at most ``--batch-bytes`` (default: the daemon's
  ``kafka.producer_batch_bytes``);
- ``batch zstd``: the same with zstd (the daemon's default ``kafka.compression``; aiokafka
  compresses at level 3).

Every built batch is read back (decompressed) and its records compared with the encoded
snapshots; a mismatch fails the run. Not included: the engine's refresh (``monitor_loop.py
--mode engine``), the per-token gauges and the producer's network path.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from common import fail_on_errors, machine_line, show, spread
from monitor_ticks import synthetic

from monitor.config import KafkaConfig, ModelConfig
from monitor.engine import Engine, Output
from monitor.records import ENCODER, RatingSnapshot
from monitor.ticks import decode_tick

#: aiokafka's compression codes.
NONE, ZSTD = 0, 4


def snapshots(ticks: int, tokens: int) -> list[RatingSnapshot]:
    engine = Engine(ModelConfig())
    out: list[Output] = []
    for _, value in synthetic(ticks, tokens, spacing=60):
        tick = decode_tick(value)
        engine.take(tick, tick.key, 0, out)
    return [o for o in out if isinstance(o, RatingSnapshot)]


def built(records: list[tuple[bytes, bytes]], compression: int, batch_bytes: int
          ) -> list[bytes]:
    """The records in as few batches of at most ``batch_bytes`` as they fit in, each
    built."""
    batches: list[bytes] = []
    builder = BatchBuilder(batch_bytes, compression)
    for key, value in records:
        if builder.append(timestamp=None, key=key, value=value, headers=[]) is None:
            batches.append(bytes(builder._build()))
            builder = BatchBuilder(batch_bytes, compression)
            builder.append(timestamp=None, key=key, value=value, headers=[])
    batches.append(bytes(builder._build()))
    return batches


def read_back(batches: list[bytes]) -> list[tuple[bytes | None, bytes | None]]:
    got: list[tuple[bytes | None, bytes | None]] = []
    for raw in batches:
        records = MemoryRecords(raw)
        while records.has_next():
            batch = records.next_batch()
            assert batch is not None
            got += [(rec.key, rec.value) for rec in batch]
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-bytes", type=int, default=KafkaConfig().producer_batch_bytes,
                        help="largest record batch (default: kafka.producer_batch_bytes's)")
    args = parser.parse_args()
    print(machine_line())
    snaps = snapshots(args.ticks, args.tokens)
    if not snaps:
        print("no snapshots: give more ticks per token", file=sys.stderr)
        return 1
    encode = ENCODER.encode
    records = [(f"{s.chain}:{s.token_address}".encode(), encode(s)) for s in snaps]
    size = sum(len(v) for _, v in records) / len(records)
    print(f"{len(snaps):,} snapshots of {size:,.0f} B on average")
    errors = sum(read_back(built(records, c, args.batch_bytes)) != records for c in (NONE, ZSTD))
    n = len(snaps)
    encode_us: list[float] = []
    batch_us: list[float] = []
    zstd_us: list[float] = []
    for _ in range(args.rounds):
        started = time.process_time()
        for s in snaps:
            encode(s)
        encode_us.append((time.process_time() - started) / n * 1e6)
        started = time.process_time()
        built(records, NONE, args.batch_bytes)
        batch_us.append((time.process_time() - started) / n * 1e6)
        started = time.process_time()
        built(records, ZSTD, args.batch_bytes)
        zstd_us.append((time.process_time() - started) / n * 1e6)
    print(show("encode", encode_us, "CPU us/snapshot"))
    print(show("batch (append + build)", batch_us, "CPU us/snapshot"))
    print(show("batch zstd (append + build)", zstd_us, "CPU us/snapshot"))
    batches = built(records, ZSTD, args.batch_bytes)
    compressed = sum(map(len, batches)) / sum(len(v) for _, v in records)
    print(f"zstd alone {spread(zstd_us)['median'] - spread(batch_us)['median']:.2f} us a "
          f"snapshot (medians); {len(batches)} batches of at most {args.batch_bytes:,} B, "
          f"{compressed:.3f} of the values' bytes")
    fail_on_errors(errors, "batches whose records differ from the encoded snapshots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
