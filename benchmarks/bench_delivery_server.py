"""The delivery worker's database work alone: drains with every send answered at once.

``bench_delivery.py``'s rates and CPU figures carry the receivers and the HTTP client,
whose CPU and scheduling swing with the machine's load far more than a change to the
cycle's SQL moves them. Here the worker runs its real dispatcher and cycle, but each
send returns a 200 without touching the network, so what a drain costs is the worker's
bookkeeping and the PostgreSQL backends' CPU (from ``/proc``, as ``bench_delivery.py``
reads it). For A/B runs of the cycle's statements: run two trees alternately, each on a
fresh database, several pairs, e.g.::

    PYTHONPATH=. python benchmarks/bench_delivery_server.py \\
        --storage-url postgresql://postgres@127.0.0.1:5432/postgres --rounds 3

Without ``--storage-url`` each drain runs on a temporary SQLite file, whose work is the
worker's own CPU (backends read 0). Prints one line per drain: deliveries/s, backends'
and worker's CPU µs per delivery.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from delivery_worker import (
    KEY,
    any_waiting,
    backend_cpu,
    count_status,
    drop_created,
    event,
    fresh_url,
)

from monitor.config import DeliveryConfig
from monitor.records import EVENT_TYPE, encode
from monitor.storage import connect
from monitor.storage.deliveries import DeliveryStore, NewEvent
from monitor.storage.postgres import PostgresDatabase
from monitor.storage.webhooks import WebhookStore, migrate_webhooks
from monitor.webhooks.dispatcher import DeliveryAttempts, Dispatcher
from monitor.webhooks.filters import Filters
from monitor.webhooks.secrets import SecretBox
from monitor.webhooks.sender import AttemptResult, Sender
from monitor.webhooks.urls import origin


class InstantSender(Sender):
    """Answers every send with a 200 after one turn of the event loop."""

    async def send(self, url: str, event_bytes: bytes, *, event_type: str, event_id: str,
                   secret: str, previous_secret: str | None = None,
                   delivered_at: float | None = None,
                   task: asyncio.Task[Any] | None = None) -> AttemptResult:
        await asyncio.sleep(0)
        return AttemptResult(200, 0.1, None)


class Drained(NamedTuple):
    rate: float  # deliveries/s
    backends: float  # the PostgreSQL backends' CPU µs per delivery (0 on SQLite)
    worker: float  # the worker's CPU µs per delivery
    deliveries: int
    cycles: int  # the worker's cycle statements
    pinned_pid: int | None  # the PostgreSQL backend that ran only the cycles


async def drain(url: str, subs: int, events: int, endpoints: int) -> Drained:
    """One drain on a fresh database (see the module docstring)."""
    config = DeliveryConfig(allow_loopback=True, secret_encryption_key=KEY,
                            timeout_seconds=2.0, backoff_base_seconds=0.5,
                            backoff_max_seconds=2.0)
    db = await connect(url)
    pinned_pid = None
    if isinstance(db, PostgresDatabase):
        # The cycle's connection taken before the set-up: its backend runs cycles only.
        await db.fetch_pinned("SELECT 1")
        pinned_pid = db.pinned_pid()
    await migrate_webhooks(db)
    store = WebhookStore(db)
    key = await store.create_api_key("bench", "dpm_server", time.time())
    box = SecretBox.from_config(config)
    for i in range(subs):
        target = f"http://127.0.0.1:{9000 + i % endpoints}/ok"  # never connected to
        sid = f"00000000-0000-4000-8000-{i:012d}"
        await store.create_subscription(
            sub_id=sid, api_key_id=key.id, webhook_url=target, endpoint=origin(target),
            event_types=[EVENT_TYPE], filters=Filters(), secret_sealed=box.seal("s" * 32, sid),
            now=time.time())
    active = [s for s in await store.active_subscriptions() if s.api_key_id == key.id]
    dispatcher = Dispatcher(DeliveryAttempts(DeliveryStore(db), InstantSender(config), box,
                                             config))
    new = [NewEvent(e.event_id, EVENT_TYPE, encode(e), active)
           for e in (event() for _ in range(events))]
    await DeliveryStore(db).record_events(new, time.time())
    total = events * len(active)
    before = await backend_cpu(db)
    cycles = 0
    if isinstance(db, PostgresDatabase):
        fetch_pinned = db.fetch_pinned

        async def counted(sql: str, *args: Any) -> list[Any]:
            nonlocal cycles
            cycles += 1
            return await fetch_pinned(sql, *args)

        db.fetch_pinned = counted  # type: ignore[method-assign]
    cpu, started = time.process_time(), time.perf_counter()
    stop = asyncio.Event()
    runner = asyncio.create_task(dispatcher.run(stop))
    dispatcher.wake.set()
    while await any_waiting(db):  # noqa: ASYNC110 (polls the database)
        await asyncio.sleep(0.05)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    served = sum(t - before.get(pid, 0.0) for pid, t in (await backend_cpu(db)).items())
    done = await count_status(db, "success")
    stop.set()
    await runner
    await db.close()
    if done != total:
        raise SystemExit(f"{total - done} deliveries not delivered")
    return Drained(total / elapsed, served / total * 1e6, cpu / total * 1e6, total, cycles,
                   pinned_pid)


async def main(args: argparse.Namespace) -> None:
    try:
        for n in range(args.rounds):
            url = await fresh_url(args.storage_url, Path(tempfile.gettempdir()))
            d = await drain(url, 100, args.deliveries // 100, args.endpoints)
            print(f"round {n + 1}: {d.rate:8.0f} deliveries/s  backends {d.backends:6.1f}"
                  f"  worker {d.worker:6.1f} CPU µs per delivery", flush=True)
    finally:
        await drop_created()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage-url", default="", help="a PostgreSQL server URL: each "
                        "round makes a fresh database there (dropped at the end); empty "
                        "(the default): a temporary SQLite file per round")
    parser.add_argument("--deliveries", type=int, default=20000)
    parser.add_argument("--endpoints", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(parser.parse_args()))
