"""The disk's flush latency, over time: what every PostgreSQL commit waits for.

    python benchmarks/bench_fsync.py [--dir DIR] [--seconds 60] [--rate 100]

Writes one 8 kB block and flushes it (``fdatasync``) ``--rate`` times a second for
``--seconds`` into a temporary file in ``--dir`` (default: the temporary directory; give
the database's own disk), then prints the flushes' median, p99, p99.9 and maximum, and the
*episodes*: stretches in which flushes took over ``--slow-ms``, joined while less than
``--gap`` seconds apart.

Why: PostgreSQL (``synchronous_commit`` on, the default) waits for this flush of its
write-ahead log at every commit, and a delivery's way to its receiver holds two commits
(the intake's insert, the worker's claim). The delivery rows' p99s on PostgreSQL inherit
the disk's episodes; on SQLite (write-ahead log, ``synchronous=NORMAL``) a commit does not
flush, so they do not (docs/performance.md, forty-fourth pass). A write or flush that
fails is counted and fails the run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

from common import fail_on_errors, machine_line, quantile

BLOCK = 8192
#: Blocks the file cycles through: a log segment's first 2 MB, rewritten in turn.
BLOCKS = 256


def episodes(slow: list[tuple[float, float]], gap: float) -> list[tuple[float, float, int, float]]:
    """``slow`` flushes (time in the run, ms) joined into episodes while less than ``gap``
    seconds apart: (first, last, how many, worst ms) each."""
    out: list[tuple[float, float, int, float]] = []
    for at, ms in slow:
        if out and at - out[-1][1] < gap:
            first, _, count, worst = out[-1]
            out[-1] = (first, at, count + 1, max(worst, ms))
        else:
            out.append((at, at, 1, ms))
    return out


def probe(folder: str, seconds: float, rate: float) -> tuple[list[float], list[float], int]:
    """Each flush's latency (ms) and start (s into the run), and the errors met."""
    latencies: list[float] = []
    starts: list[float] = []
    errors = 0
    block = os.urandom(BLOCK)
    interval = 1.0 / rate
    fd, path = tempfile.mkstemp(prefix="bench_fsync_", dir=folder)
    try:
        began = time.perf_counter()
        n = 0
        while (now := time.perf_counter()) - began < seconds:
            try:
                os.pwrite(fd, block, (n % BLOCKS) * BLOCK)
                os.fdatasync(fd)
            except OSError as exc:
                errors += 1
                print(f"  flush {n}: {exc}", file=sys.stderr)
            took = time.perf_counter() - now
            latencies.append(took * 1000)
            starts.append(now - began)
            n += 1
            # Paced from the run's start: a slow flush is not followed by a burst.
            wait = began + n * interval - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
    finally:
        os.close(fd)
        os.unlink(path)
    return latencies, starts, errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default=tempfile.gettempdir(),
                        help="where the probe file goes: the database's disk")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=100.0, help="flushes a second")
    parser.add_argument("--slow-ms", type=float, default=5.0,
                        help="a flush slower than this belongs to an episode")
    parser.add_argument("--gap", type=float, default=0.5,
                        help="seconds between slow flushes that still join one episode")
    args = parser.parse_args()
    if args.seconds <= 0 or args.rate <= 0:
        parser.error("--seconds and --rate must be positive")
    print(machine_line())
    print(f"flushing {BLOCK} bytes {args.rate:g} times a second for {args.seconds:g} s "
          f"in {args.dir}", flush=True)
    latencies, starts, errors = probe(args.dir, args.seconds, args.rate)
    ordered = sorted(latencies)
    print(f"{len(ordered):,} flushes: median {statistics.median(ordered):.2f} ms, "
          f"p99 {quantile(ordered, 0.99):.2f} ms, p99.9 {quantile(ordered, 0.999):.2f} ms, "
          f"max {ordered[-1]:.1f} ms")
    slow = [(at, ms) for at, ms in zip(starts, latencies, strict=True) if ms > args.slow_ms]
    found = episodes(slow, args.gap)
    share = sum(last - first for first, last, _, _ in found) / args.seconds
    print(f"episodes (flushes over {args.slow_ms:g} ms, joined while under {args.gap:g} s "
          f"apart): {len(found)}, {len(slow)} slow flushes, {share:.1%} of the run")
    for first, last, count, worst in found:
        print(f"  {first:7.2f}-{last:7.2f} s: {count:4d} slow, worst {worst:6.1f} ms")
    fail_on_errors(errors, "the flushes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
