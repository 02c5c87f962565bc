"""The delivery cycle's due read next to a full endpoint's backlog.

    python benchmarks/bench_due_read.py [--storage-url URL] [--backlogs 0,1000,10000,50000]

A hanging endpoint holds its per-endpoint slots until each send times out; meanwhile its
new deliveries stay ``pending`` and, being the oldest due rows, come first on the
``(status, next_attempt_at)`` index. Until the twenty-second pass the cycle's due read
left out endpoints without room by a filter on the joined subscription, so it walked
every one of those rows before it reached a healthy endpoint's (50,000 rows: 33 ms a
cycle on SQLite, 67 ms on PostgreSQL). The read's walk is now bounded, and the rows
beyond it are read by subscription. This script measures it: for each backlog size N,
N pending deliveries of endpoint A (given no room, as a hanging one has none) and a
queue of endpoint B's, then one cycle at a time claiming one of B's (``run_cycle``, the
worker's own call), and prints the median and p90 cycle time per N. Every cycle must
claim exactly one of B's deliveries and none of A's, else the run fails.

Measured figures go to docs/performance.md; nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from delivery_worker import drop_created, event, fresh_url, setup

from monitor.config import DeliveryConfig
from monitor.records import EVENT_TYPE, encode
from monitor.storage.deliveries import DeliveryStore, NewEvent
from monitor.storage.delivery_batches import run_cycle
from monitor.storage.due_read import ClaimRequest

#: Events recorded per call while filling the backlog (one transaction each).
CHUNK = 2000


async def one_backlog(url: str, backlog: int, cycles: int) -> tuple[list[float], int]:
    """Cycle times (ms) with ``backlog`` pending deliveries of a full endpoint, and the
    number of cycles that claimed something other than one of the healthy endpoint's."""
    config = DeliveryConfig()
    full_url, healthy_url = "http://127.0.0.1:9/hang", "http://127.0.0.2:9/ok"
    db, active, dispatcher = await setup(url, [full_url, healthy_url], config)
    full = next(s for s in active if s.webhook_url == full_url)
    healthy = next(s for s in active if s.webhook_url == healthy_url)
    store = DeliveryStore(db)
    start = time.time() - 3600  # all due: created an hour ago
    for first in range(0, backlog, CHUNK):
        events = [NewEvent(e.event_id, EVENT_TYPE, encode(e), [full])
                  for e in (event() for _ in range(min(CHUNK, backlog - first)))]
        await store.record_events(events, start + first * 1e-3)
    events = [NewEvent(e.event_id, EVENT_TYPE, encode(e), [healthy])
              for e in (event() for _ in range(cycles))]
    await store.record_events(events, time.time() - 1)
    times: list[float] = []
    wrong = 0
    for _ in range(cycles):
        now = time.time()
        claim = ClaimRequest(limit=1, room={full.endpoint: 0}, default_room=4,
                             token=uuid.uuid4().hex, now=now, lease_until=now + 60,
                             max_attempts=config.max_attempts)
        began = time.perf_counter()
        result = await run_cycle(db, [], claim)
        times.append((time.perf_counter() - began) * 1000)
        claimed = [d.endpoint for d, _ in result.claimed]
        wrong += claimed != [healthy.endpoint]
    await dispatcher.attempts.sender.close()
    await db.close()
    return times, wrong


async def main(args: argparse.Namespace) -> int:
    from common import machine_line

    print(machine_line())
    print(f"storage: {args.storage_url or 'sqlite (temporary file)'}; {args.cycles} cycles "
          "per backlog, each claiming one healthy delivery")
    errors = 0
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for backlog in args.backlogs:
                url = await fresh_url(args.storage_url, Path(tmp))
                times, wrong = await one_backlog(url, backlog, args.cycles)
                errors += wrong
                ordered = sorted(times)
                print(f"  full endpoint's backlog {backlog:>7,}: cycle median "
                      f"{statistics.median(times):7.2f} ms, p90 "
                      f"{ordered[int(len(ordered) * 0.9)]:7.2f} ms; wrong claims {wrong}",
                      flush=True)
        finally:
            if args.storage_url:
                await drop_created()
    if errors:
        print(f"FAILED: {errors} cycles claimed something else than one healthy delivery")
        return 1
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--storage-url", default="", help="a PostgreSQL URL (default SQLite)")
    parser.add_argument("--backlogs", default="0,1000,10000,50000",
                        type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--cycles", type=int, default=50)
    sys.exit(asyncio.run(main(parser.parse_args())))
