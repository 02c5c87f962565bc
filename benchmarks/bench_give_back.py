"""What a slow flaky receiver's failures cost its neighbours in database statements.

    python benchmarks/bench_give_back.py [--storage-url URL] [--rate 10] [--runs 4]

A worker gives back (uncounted, in a statement of its own before the next cycle's claim)
the deliveries it claimed for an endpoint but can no longer send as claimed. Each run
here sends ``--rate`` events/s for ``--seconds`` to a healthy receiver and to a slow
flaky one (``bench_delivery.py``'s ``slowflaky``: answers after two event intervals, 503
to a fifth of its requests), then prints the healthy endpoint's latency (created ->
success) quantiles and how many give-back statements the worker made and how many
deliveries they gave back. It measures the code it runs; to compare two versions, run
it from each tree in turn (``PYTHONPATH=tree``), alternating, as docs/performance.md
does (forty-first pass). The healthy endpoint must have every delivery succeed, else
the run fails.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

import delivery_worker as worker
from common import machine_line, quantile
from delivery_receivers import neighbour_url, start_receivers

import monitor.webhooks.dispatcher as dispatcher_module
from monitor.logs import configure_logging
from monitor.storage import Database
from monitor.storage.deliveries import DueDelivery
from monitor.storage.delivery_batches import release_unsent


class GiveBacks:
    """Counts the worker's give-back statements by wrapping the function it calls."""

    def __init__(self) -> None:
        self.statements = 0
        self.deliveries = 0
        self.real = release_unsent

    async def __call__(self, db: Database, unsent: Sequence[tuple[DueDelivery, str, int]]
                       ) -> int:
        if unsent:
            self.statements += 1
            self.deliveries += len(unsent)
        return await self.real(db, unsent)


async def one_run(args: argparse.Namespace, ports: list[int], tmp: Path) -> float:
    counter = GiveBacks()
    setattr(dispatcher_module, "release_unsent", counter)  # noqa: B010 (not exported)
    try:
        run = await worker.healthy_run(
            await worker.fresh_url(args.storage_url, tmp),
            [f"http://127.0.0.1:{ports[1]}/ok",
             neighbour_url(ports[0], "slowflaky", args.rate)],
            args.seconds, args.rate, worker.worker_config())
    finally:
        setattr(dispatcher_module, "release_unsent", release_unsent)  # noqa: B010
    latencies = sorted(r["latency"] * 1000 for r in run.rows)
    failed = sum(1 for r in run.rows if r["attempts"] != 1)
    if len(latencies) != run.sent or failed:
        raise SystemExit(f"the healthy endpoint: {len(latencies)} of {run.sent} delivered, "
                         f"{failed} needed more than one attempt")
    p99 = quantile(latencies, 0.99)
    print(f"healthy p50 {quantile(latencies, 0.5):5.1f} ms  p90 {quantile(latencies, 0.9):5.1f}"
          f"  p99 {p99:5.1f}  max {latencies[-1]:5.1f} ({len(latencies)} deliveries); "
          f"give-back statements {counter.statements}, deliveries given back "
          f"{counter.deliveries}; slow flaky attempts {run.other_attempts}", flush=True)
    return p99


async def main(args: argparse.Namespace) -> None:
    configure_logging(level="warning", fmt="json")
    proc, ports = start_receivers(2)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            print(machine_line())
            print(f"storage: {args.storage_url or 'sqlite (temp file)'}; {args.rate:g} events/s"
                  f" for {args.seconds:g} s; slow flaky answers after {2 / args.rate:g} s")
            p99s = [await one_run(args, ports, Path(tmp)) for _ in range(args.runs)]
            print(f"healthy p99, median of {args.runs}: {statistics.median(p99s):.1f} ms")
    finally:
        proc.kill()
        if args.storage_url:
            await worker.drop_created()


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n", 1)[1])
    parser.add_argument("--storage-url", help="default: a temporary SQLite file per run; a "
                        "postgresql:// URL names a server database used to create (and "
                        "drop) one fresh database per run")
    parser.add_argument("--rate", type=float, default=10.0, help="events/s")
    parser.add_argument("--seconds", type=float, default=24.0, help="length of each run")
    parser.add_argument("--runs", type=int, default=4, help="runs, one after the other")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))
