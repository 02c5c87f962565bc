"""The delivery benchmarks' worker side: a database with subscriptions to local
receivers (delivery_receivers.py), the worker draining a backlog or serving a steady
event rate, and what that cost (this process's CPU, the PostgreSQL backends').

Imported by bench_delivery.py (the table's delivery rows) and the delivery benchmarks
beside it; not a command itself.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
import uuid
from pathlib import Path
from typing import Any, NamedTuple

from common import quantile

from monitor.config import DeliveryConfig
from monitor.records import EVENT_TYPE, TierChangeData, TierChangeEvent, encode
from monitor.storage import Database, connect
from monitor.storage.deliveries import DeliveryStore, NewEvent
from monitor.storage.webhooks import Subscription, WebhookStore, migrate_webhooks
from monitor.webhooks.dispatcher import DeliveryAttempts, Dispatcher
from monitor.webhooks.filters import Filters
from monitor.webhooks.secrets import SecretBox
from monitor.webhooks.sender import Sender
from monitor.webhooks.urls import origin

KEY = base64.urlsafe_b64encode(b"b" * 32).decode()


def event() -> TierChangeEvent:
    return TierChangeEvent(EVENT_TYPE, str(uuid.uuid4()), "2024-01-01T00:00:00Z", TierChangeData(
        "0xdac17f958d2ee523a2206206994597c13d831ec7", "eth", "USDT", "ok", "warning", 65.0,
        -2.5, "0.975", "1"))


async def setup(url: str, urls: list[str], config: DeliveryConfig
                ) -> tuple[Database, list[Subscription], Dispatcher]:
    db = await connect(url)
    await migrate_webhooks(db)
    store = WebhookStore(db)
    key = await store.create_api_key("bench", "dpm_" + uuid.uuid4().hex, time.time())
    box = SecretBox.from_config(config)
    for target in urls:
        sid = str(uuid.uuid4())
        await store.create_subscription(
            sub_id=sid, api_key_id=key.id, webhook_url=target, endpoint=origin(target),
            event_types=[EVENT_TYPE], filters=Filters(), secret_sealed=box.seal("s" * 32, sid),
            now=time.time())
    subs = [s for s in await store.active_subscriptions() if s.api_key_id == key.id]
    attempts = DeliveryAttempts(DeliveryStore(db), Sender(config), box, config)
    return db, subs, Dispatcher(attempts)


async def any_waiting(db: Database) -> bool:
    """Whether a delivery is still pending or failed: the first entry of each status on
    the (status, next_attempt_at) index, not a count. Counting what was left walked
    thousands of index entries and their rows every 50 ms (~8-16 ms a poll, load 4-6),
    CPU the worker's own database server and, on SQLite, its one connection lost to the
    harness; the whole count is taken once, at the end (successes). ``next_attempt_at IS
    NOT NULL`` (always true of both statuses) lets the partial due index answer."""
    return bool(await db.fetchval(
        "SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE status = 'pending'"
        " AND next_attempt_at IS NOT NULL) OR EXISTS (SELECT 1 FROM webhook_deliveries"
        " WHERE status = 'failed' AND next_attempt_at IS NOT NULL)"))


async def backend_cpu(db: Database) -> dict[int, float]:
    """CPU seconds used so far by each PostgreSQL backend serving this database (from
    /proc: the server runs on this machine), or nothing on SQLite, whose work is the
    worker's own CPU. The database server's CPU per delivery was above the worker's own."""
    if db.dialect != "postgresql":
        return {}
    used: dict[int, float] = {}
    for row in await db.fetch(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"):
        seconds = process_cpu(row["pid"])
        if seconds is not None:
            used[row["pid"]] = seconds
    return used


def process_cpu(pid: int) -> float | None:
    """User + system CPU seconds of a process (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def file_calls() -> int | None:
    """Read and write system calls this process has made so far (``syscr`` + ``syscw`` of
    /proc/self/io: read, pread, write, pwrite and their vector forms, on files, pipes and
    terminals; a socket's send and recv are not among them), or None without that file.

    On SQLite they are the worker's database I/O: the log's frames (two writes each),
    the checkpoints' copies, the pages read back. A count the machine's load does not
    move, where CPU per delivery spreads by a fifth between drains of the same code on a
    noisy machine, and each such call cost ~0.9 µs of CPU on an AMD EPYC
    (docs/performance.md, forty-seventh pass): what an A/B of the SQLite cycle reads."""
    try:
        with open("/proc/self/io") as fh:
            counts = dict(line.split(": ", 1) for line in fh.read().splitlines() if line)
        return int(counts["syscr"]) + int(counts["syscw"])
    except (OSError, KeyError, ValueError):
        return None


class Drain(NamedTuple):
    """One worker's drain of a backlog (:func:`throughput`)."""

    rate: float  # deliveries/s
    failed: int  # failed attempts and deliveries not delivered
    cpu_us: float  # this process's CPU per delivery
    backend_us: float | None  # the PostgreSQL backends' CPU per delivery (None: SQLite)
    file_calls: float | None  # this process's file reads and writes per delivery (SQLite)
    wal_bytes: float | None  # PostgreSQL's log written per delivery (None: SQLite)


async def wal_position(db: Database) -> int | None:
    """Bytes PostgreSQL has written to its log so far (``pg_current_wal_lsn``), or None on
    SQLite. The server's whole log, so a drain's difference counts any other database's
    writes too: run it on a server nothing else writes to. What the cycle writes per
    delivery (its row versions, index entries, row locks) is a figure the machine's load
    does not move, where the backends' CPU per delivery does."""
    if db.dialect != "postgresql":
        return None
    return int(await db.fetchval(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"))


async def count_status(db: Database, status: str) -> int:
    return int(await db.fetchval(
        "SELECT COUNT(*) FROM webhook_deliveries WHERE status = $1", status) or 0)


async def store_history(db: Database, active: list[Subscription], rows: int) -> int:
    """About ``rows`` finished deliveries with one attempt each, as a worker that has run
    for a while leaves them (until ``prune``): its intake, then one UPDATE rather than
    that many sends (a success's attempt is kept on its delivery's row, webhooks schema
    version 6). Returns how many."""
    if rows <= 0:
        return 0
    events = [NewEvent(e.event_id, EVENT_TYPE, encode(e), active)
              for e in (event() for _ in range(max(1, rows // len(active))))]
    made = await DeliveryStore(db).record_events(events, time.time() - 86_400)
    await db.execute("UPDATE webhook_deliveries SET status = 'success', attempts = 1,"
                     " next_attempt_at = NULL, completed_at = updated_at,"
                     " last_status_code = 200, success_started_at = created_at,"
                     " success_latency_ms = 5")
    # Written out of the log into the tables, as a running service's would long be.
    if db.dialect == "sqlite":
        await db.fetch("PRAGMA wal_checkpoint(TRUNCATE)")
    else:
        await db.execute("CHECKPOINT")
    return made


async def throughput(url: str, ports: list[int], subs: int, deliveries: int,
                     config: DeliveryConfig, history: int = 0) -> Drain:
    """What one worker draining ``deliveries`` due rows achieved and cost, with about
    ``history`` finished deliveries and their attempts already stored."""
    urls = [f"http://127.0.0.1:{ports[i % len(ports)]}/ok" for i in range(subs)]
    db, active, dispatcher = await setup(url, urls, config)
    done_before = await store_history(db, active, history)
    store = DeliveryStore(db)
    events = [NewEvent(e.event_id, EVENT_TYPE, encode(e), active)
              for e in (event() for _ in range(max(1, deliveries // subs)))]
    total = len(events) * subs
    await store.record_events(events, time.time())
    stop = asyncio.Event()
    backends = await backend_cpu(db)
    wal = await wal_position(db)  # a round trip: before the drain's clocks start
    started = time.perf_counter()
    cpu = time.process_time()
    calls = file_calls()
    runner = asyncio.create_task(dispatcher.run(stop))
    dispatcher.wake.set()  # as the intake does after recording deliveries
    deadline = started + 300
    # Whether anything is left, looked up on the (status, next_attempt_at) index (see
    # any_waiting: a count there still cost the worker's database a scan per poll).
    while await any_waiting(db):
        if time.perf_counter() > deadline:
            break
        await asyncio.sleep(0.05)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    calls_now = file_calls()
    wal_now = await wal_position(db)
    served = sum(t - backends.get(pid, 0.0) for pid, t in (await backend_cpu(db)).items())
    failed = int(await db.fetchval(
        "SELECT COUNT(*) FROM webhook_attempts WHERE status_code IS NULL"
        " OR status_code < 200 OR status_code >= 300") or 0)
    failed += total - (await count_status(db, "success") - done_before)
    stop.set()
    await runner
    await dispatcher.attempts.sender.close()
    await db.close()
    return Drain(total / elapsed, failed, cpu / total * 1e6,
                 served / total * 1e6 if db.dialect == "postgresql" else None,
                 # PostgreSQL's I/O is its backends', not this process's.
                 None if calls is None or calls_now is None or db.dialect != "sqlite"
                 else (calls_now - calls) / total,
                 None if wal is None or wal_now is None else (wal_now - wal) / total)


def worker_config() -> DeliveryConfig:
    """The benchmarks' worker: loopback receivers, a 2 s timeout, retries after 0.5-2 s.
    ``poll_interval_seconds`` is left at its default: new deliveries wake the worker (as
    the intake does), so the poll only finds retries coming due."""
    return DeliveryConfig(allow_loopback=True, secret_encryption_key=KEY, timeout_seconds=2.0,
                          backoff_base_seconds=0.5, backoff_max_seconds=2.0)


class Latency(NamedTuple):
    """One latency run: the healthy endpoint's p99, and what the run cost this process."""

    p99_ms: float
    #: CPU of this process (the worker, its database work on SQLite, and the event
    #: inserts, the same in every run) per event, from the first event to the last success.
    cpu_us: float
    #: Dispatcher cycles per event: a neighbour that never answers must not make the
    #: worker spin on its backlog.
    cycles: float


def count_cycles(dispatcher: Dispatcher) -> list[int]:
    """A one-element counter of ``dispatcher``'s cycles (its ``cycle`` wrapped)."""
    counter = [0]
    original = dispatcher.cycle

    async def counted(look: bool = True) -> bool:
        counter[0] += 1
        return await original(look)

    dispatcher.cycle = counted  # type: ignore[method-assign]
    return counter


class HealthyRun(NamedTuple):
    """What one steady-rate run left: the healthy endpoint's deliveries and its cost."""

    #: The healthy endpoint's deliveries: ``created_at``, ``latency`` (s), ``attempts``.
    rows: list[Any]
    sent: int
    #: Attempts at the other endpoints (all of them failed when those never answer).
    other_attempts: int
    cpu_seconds: float
    cycles: int


async def healthy_run(url: str, urls: list[str], seconds: float, rate: float,
                      config: DeliveryConfig) -> HealthyRun:
    """Events at ``rate``/s for ``seconds``, each to a subscription of every one of
    ``urls``, the first a healthy receiver's (ending ``/ok``); waits until the healthy
    endpoint has every one of its deliveries, then stops the worker."""
    db, active, dispatcher = await setup(url, urls, config)
    healthy = next(s for s in active if s.webhook_url == urls[0])
    store = DeliveryStore(db)
    stop = asyncio.Event()
    cycles = count_cycles(dispatcher)
    runner = asyncio.create_task(dispatcher.run(stop))
    sent = 0
    cpu = time.process_time()
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        e = event()
        await store.record_events([NewEvent(e.event_id, EVENT_TYPE, encode(e), active)],
                                  time.time())
        dispatcher.wake.set()
        sent += 1
        await asyncio.sleep(1.0 / rate)
    while int(await db.fetchval(  # noqa: ASYNC110 (polls the database)
            "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'success'"
            " AND subscription_id = $1", healthy.id) or 0) < sent:
        await asyncio.sleep(0.05)
    cpu = time.process_time() - cpu
    ran = cycles[0]
    rows = await db.fetch(
        "SELECT created_at, completed_at - created_at AS latency, attempts"
        " FROM webhook_deliveries WHERE subscription_id = $1", healthy.id)
    # Finished attempts: the history rows, and the successes kept on their deliveries'
    # rows (webhooks schema version 6).
    other_attempts = await db.fetchval(
        "SELECT (SELECT COUNT(*) FROM webhook_attempts a JOIN webhook_deliveries d"
        " ON d.id = a.delivery_id WHERE d.subscription_id <> $1)"
        " + (SELECT COUNT(*) FROM webhook_deliveries WHERE subscription_id <> $1"
        " AND success_started_at IS NOT NULL)", healthy.id)
    stop.set()
    await runner
    await dispatcher.attempts.sender.close()
    await db.close()
    return HealthyRun(rows, sent, int(other_attempts or 0), cpu, ran)


async def healthy_p99(url: str, port: int, other: str | None, seconds: float,
                      rate: float, config: DeliveryConfig) -> Latency:
    """p99 of created -> success for a healthy endpoint under ``rate`` events/s; with
    ``other`` (a URL), every event also goes there (a second healthy or a hanging one)."""
    urls = [f"http://127.0.0.1:{port}/ok"]
    if other is not None:
        urls.append(other)
    run = await healthy_run(url, urls, seconds, rate, config)
    if other is not None and other.endswith("/hang"):
        print(f"  (hanging endpoint: {run.other_attempts} timed-out attempts during the run)")
    elif other is not None and not other.endswith("/ok"):
        print(f"  ({other.rsplit('/', 1)[-1]} endpoint: {run.other_attempts} attempts during "
              "the run)")
    latencies: list[float] = sorted(r["latency"] * 1000 for r in run.rows)
    return Latency(quantile(latencies, 0.99), run.cpu_seconds / run.sent * 1e6,
                   run.cycles / run.sent)


CREATED: list[tuple[str, str]] = []


async def fresh_url(base: str | None, tmp: Path) -> str:
    """An empty database per run: a SQLite file, or a new database on the given server."""
    if not base:
        return f"sqlite:///{tmp / (uuid.uuid4().hex + '.db')}"
    import asyncpg

    name = f"bench_delivery_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(base)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    CREATED.append((base, name))
    return f"{base.rsplit('/', 1)[0]}/{name}"


async def drop_created() -> None:
    import asyncpg

    for base, name in CREATED:
        admin = await asyncpg.connect(base)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()
