"""Where a SQLite delivery cycle runs: the event loop's thread, or a thread of its own.

    python benchmarks/bench_sqlite_batches.py [--rounds 5] [--batches 3000] [--deliveries 40000]

Two figures behind ``SqliteDatabase.run_sync(..., on_thread=...)`` and the delivery
worker's ``SQLITE_THREAD_AT`` (docs/performance.md, thirty-fifth pass):

1. the hop: CPU of this process per one-row batch run on the loop's thread and on the
   thread (there and back), interleaved for ``--rounds``. The hop is why a quiet worker's
   cycles stay on the loop;
2. a drain: ``bench_delivery.py``'s ``throughput()`` (one worker, 100 subscriptions over
   8 local receiver ports) with the worker as shipped (cycles of 16+ outcomes on the
   thread) and with every cycle on the loop's thread, interleaved for ``--rounds``:
   deliveries/s and this process's CPU per delivery. Any failed attempt or non-2xx
   answer fails the run.

Printed, not asserted; the README's delivery rows come from ``bench_delivery.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from common import fail_on_errors, machine_line, show
from delivery_receivers import start_receivers
from delivery_worker import KEY, fresh_url, throughput

import monitor.storage.delivery_batches as batches
from monitor.config import DeliveryConfig
from monitor.storage import connect
from monitor.storage.sqlite import SqliteDatabase


async def hop_cpu(db: SqliteDatabase, on_thread: bool, count: int) -> float:
    """CPU µs of this process per one-row batch."""
    def work(conn: sqlite3.Connection) -> int:
        return conn.execute("INSERT INTO t VALUES (1)").rowcount

    cpu = time.process_time()
    for _ in range(count):
        await db.run_sync(work, on_thread=on_thread)
    return (time.process_time() - cpu) / count * 1e6


async def main(args: argparse.Namespace) -> None:
    print(machine_line())
    shipped = batches.SQLITE_THREAD_AT
    with tempfile.TemporaryDirectory() as tmp:
        db = await connect(f"sqlite:///{Path(tmp) / 'hop.sqlite'}")
        assert isinstance(db, SqliteDatabase)
        await db.execute("CREATE TABLE t (x INTEGER)")
        hop: dict[bool, list[float]] = {False: [], True: []}
        await hop_cpu(db, True, 200)  # the thread started, the statement prepared
        for n in range(args.rounds):
            for on_thread in ((False, True) if n % 2 == 0 else (True, False)):
                hop[on_thread].append(await hop_cpu(db, on_thread, args.batches))
        await db.close()
        print(show("one-row batch on the loop's thread", hop[False], "µs CPU"))
        print(show("one-row batch on a thread", hop[True], "µs CPU"))

        proc, ports = start_receivers(8)
        config = DeliveryConfig(allow_loopback=True, secret_encryption_key=KEY,
                                timeout_seconds=2.0, backoff_base_seconds=0.5,
                                backoff_max_seconds=2.0)
        rate: dict[str, list[float]] = {"shipped": [], "loop": []}
        cpu: dict[str, list[float]] = {"shipped": [], "loop": []}
        errors = 0
        try:
            for n in range(args.rounds):
                for which in (("shipped", "loop") if n % 2 == 0 else ("loop", "shipped")):
                    # Every cycle on the loop: no cycle carries this many outcomes.
                    batches.SQLITE_THREAD_AT = shipped if which == "shipped" else 1 << 62
                    drain = await throughput(
                        await fresh_url(None, Path(tmp)), ports, 100, args.deliveries, config)
                    rate[which].append(drain.rate)
                    cpu[which].append(drain.cpu_us)
                    errors += drain.failed
                    calls = ("" if drain.file_calls is None
                             else f"  file calls {drain.file_calls:.2f} each")
                    print(f"  round {n + 1} {which:<7} {drain.rate:8.1f}/s  failed {drain.failed}"
                          f"  cpu {drain.cpu_us:6.1f} µs each{calls}", flush=True)
        finally:
            batches.SQLITE_THREAD_AT = shipped
            proc.terminate()
            proc.wait()
    print(show(f"drain, cycles of {shipped}+ on a thread", rate["shipped"], "deliveries/s"))
    print(show("drain, every cycle on the loop", rate["loop"], "deliveries/s"))
    lower = sum(a < b for a, b in zip(cpu["shipped"], cpu["loop"], strict=True))
    print(f"CPU µs per delivery (medians): shipped {statistics.median(cpu['shipped']):.1f}, "
          f"every cycle on the loop {statistics.median(cpu['loop']):.1f}; lower with the "
          f"shipped worker in {lower} of {args.rounds} rounds")
    fail_on_errors(errors, "the drains")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (>= 3)")
    parser.add_argument("--batches", type=int, default=3000, help="one-row batches per round")
    parser.add_argument("--deliveries", type=int, default=40000, help="per drain")
    asyncio.run(main(parser.parse_args()))
