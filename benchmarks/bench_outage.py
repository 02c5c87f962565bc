"""A healthy endpoint's latency while many receivers hang at once (a hosting region down).

    python benchmarks/bench_outage.py [--hanging 16] [--seconds 24] [--storage-url URL]

One healthy receiver and ``--hanging`` receivers that never answer, each its own endpoint,
all subscribed to the same events at ``--rate`` events/s; the worker runs with the
delivery defaults but a 2 s timeout (as ``bench_delivery.py``). With its default bounds
(64 sends in all, 4 per endpoint), 16 dead receivers could hold every slot: the healthy
endpoint's deliveries then waited for timeouts to free one. A failing endpoint is now
probed one send at a time (monitor/webhooks/dispatcher.py), so after each dead
receiver's first timeout it holds one slot. Nothing can know a receiver is dead before
its first send times out, so the script prints the healthy endpoint's latency over the
whole run and over the events created after ``--warm-up`` seconds, and how many sends
to the dead receivers timed out. Any healthy delivery that did not succeed at its first
attempt fails the run.

The worker logs as a deployed one does (info, JSON lines to stderr). Measured figures go
to docs/performance.md; nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from common import fail_on_errors, machine_line, quantile
from delivery_receivers import start_receivers
from delivery_worker import drop_created, fresh_url, healthy_run, worker_config

from monitor.logs import configure_logging


def _line(name: str, latencies_ms: list[float]) -> str:
    ordered = sorted(latencies_ms)
    return (f"{name}: p50 {quantile(ordered, 0.5):.1f} ms, p99 {quantile(ordered, 0.99):.1f} ms,"
            f" max {ordered[-1]:.0f} ms ({len(ordered)} deliveries)")


async def main(args: argparse.Namespace) -> None:
    configure_logging(level="info", fmt="json")  # as a deployed worker logs (to stderr)
    proc, ports = start_receivers(args.hanging + 1)
    config = worker_config()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            print(machine_line())
            print(f"storage: {args.storage_url or 'sqlite (temp file)'}; {args.hanging} hanging "
                  f"receivers; max_concurrency {config.max_concurrency}, per endpoint "
                  f"{config.per_endpoint_concurrency}, timeout {config.timeout_seconds:g} s",
                  flush=True)
            urls = [f"http://127.0.0.1:{ports[-1]}/ok"] + [
                f"http://127.0.0.1:{p}/hang" for p in ports[:-1]]
            run = await healthy_run(await fresh_url(args.storage_url, Path(tmp)), urls,
                                    args.seconds, args.rate, config)
    finally:
        proc.terminate()
        proc.wait()
        if args.storage_url:
            await drop_created()
    errors = sum(1 for r in run.rows if r["attempts"] != 1) + (run.sent - len(run.rows))
    begun = min(r["created_at"] for r in run.rows)  # the first event
    every = [r["latency"] * 1000 for r in run.rows]
    later = [r["latency"] * 1000 for r in run.rows if r["created_at"] - begun >= args.warm_up]
    print(_line("healthy endpoint, whole run", every))
    print(_line(f"healthy endpoint, events after the first {args.warm_up:g} s", later))
    print(f"sends to the hanging receivers (each timed out): {run.other_attempts}", flush=True)
    fail_on_errors(errors, "the run (healthy deliveries not delivered at their first attempt)")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hanging", type=int, default=16, help="receivers that never answer")
    parser.add_argument("--seconds", type=float, default=24.0, help="how long events come")
    parser.add_argument("--rate", type=float, default=50.0, help="events per second")
    parser.add_argument("--warm-up", type=float, default=10.0,
                        help="seconds after which events count in the second line")
    parser.add_argument("--storage-url", default=None,
                        help="default: a temporary SQLite file; a postgresql:// URL names a "
                        "server database used to create (and drop) a fresh database")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
