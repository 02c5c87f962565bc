"""Webhook delivery benchmark: throughput against a bare POST loop, and isolation.

    python benchmarks/bench_delivery.py [--storage-url URL] [--endpoints 8] [--rounds 3]

1. deliveries/s of one worker, from the database to local receivers (each event fans out
   to 100 subscriptions spread over ``--endpoints`` receiver ports, as real subscribers
   have their own hosts), next to its limit: a bare aiohttp POST loop sending the same
   number of same-sized bodies to the same receivers with the same concurrency. The worker
   sends with its own HTTP/1.1 client (monitor/webhooks/http1.py), cheaper than aiohttp's,
   so the same loop over that client runs too and is printed beside them: the worker's
   bookkeeping is the gap to it. The three rotate for ``--rounds`` rounds; the ratio is
   of the medians (target >= 0.8 and >= 2,000/s);
2. p99 latency (delivery created -> success recorded) of a healthy endpoint under a steady
   event rate, next to another endpoint that answers (the baseline) or that never answers,
   each case ``--isolation-rounds`` times interleaved; the ratio is of the medians of the
   p99s (target: within 1.2x). ``--neighbours hang,fail,slow`` adds a row for a neighbour
   that answers 503 at once (every event brings retries) and one that answers after 1 s;
   ``flap`` one that answers 503 and 200 in turn (it fails and recovers all the time:
   each failure after a success takes it back to one send at a time); ``flaky`` one
   that answers 503 to a third of its requests, drawn at random (seeded): it often has
   two successes in a row, leaves the probe and fails again; ``slowflaky`` one that
   answers after two event intervals and 503 to a fifth of its requests: it needs ~2.5
   sends in flight, so what the probe holds back from it shows; ``busy`` the same
   receiver never failing, and ``offbeat`` that one answering after 2.35 intervals
   (between the events, where ``busy``'s answers come in step with them).

Receivers run in a child process (the second core), so the figures are the worker's. The
Kafka intake is not included: it only inserts rows; this measures matching-to-2xx. Any
failed attempt or non-2xx answer fails the run. The worker logs as a deployed one does:
at the configuration's default level (info), JSON lines to stderr (``--log-level``,
``--log-format``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp
from aiohttp import web
from common import emit, fail_on_errors, machine_line, show
from yarl import URL

from monitor.config import DeliveryConfig, GcConfig
from monitor.gcpolicy import apply_gc_policy
from monitor.logs import configure_logging
from monitor.records import EVENT_TYPE, TierChangeData, TierChangeEvent, encode
from monitor.storage import Database, connect
from monitor.storage.deliveries import DeliveryStore, NewEvent
from monitor.storage.webhooks import Subscription, WebhookStore, migrate_webhooks
from monitor.webhooks.dispatcher import DeliveryAttempts, Dispatcher
from monitor.webhooks.filters import Filters
from monitor.webhooks.http1 import Http1Client, header_lines
from monitor.webhooks.secrets import SecretBox
from monitor.webhooks.sender import Sender
from monitor.webhooks.urls import origin

KEY = base64.urlsafe_b64encode(b"b" * 32).decode()


# -- receiver child process -------------------------------------------------------------
async def _serve(count: int) -> None:
    async def ok(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text="ok")

    async def hang(request: web.Request) -> web.Response:
        await asyncio.sleep(3600)
        return web.Response()

    async def fail(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(status=503, text="down")

    answers = 0

    async def flap(request: web.Request) -> web.Response:
        nonlocal answers
        await request.read()
        answers += 1
        if answers % 2:
            return web.Response(status=503, text="down")
        return web.Response(text="ok")

    draws = random.Random(15)  # the same failures in every run

    async def flaky(request: web.Request) -> web.Response:
        await request.read()
        if draws.random() < 1 / 3:
            return web.Response(status=503, text="down")
        return web.Response(text="ok")

    slow_draws = random.Random(16)  # not flaky's: its own draws, the same in every run

    async def slowflaky(request: web.Request) -> web.Response:
        await request.read()
        await asyncio.sleep(float(request.query.get("after", "0.2")))
        if slow_draws.random() < float(request.query.get("fail", "0.2")):
            return web.Response(status=503, text="down")
        return web.Response(text="ok")

    async def slow(request: web.Request) -> web.Response:
        await request.read()
        await asyncio.sleep(1.0)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/ok", ok)
    app.router.add_post("/hang", hang)
    app.router.add_post("/fail", fail)
    app.router.add_post("/slow", slow)
    app.router.add_post("/flap", flap)
    app.router.add_post("/flaky", flaky)
    app.router.add_post("/slowflaky", slowflaky)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    ports = []
    for _ in range(count):
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        ports.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    print(" ".join(map(str, ports)), flush=True)
    await asyncio.Event().wait()


def start_receivers(count: int) -> tuple[subprocess.Popen[str], list[int]]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(count)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, [int(p) for p in proc.stdout.readline().split()]


# -- worker side --------------------------------------------------------------------------
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


async def count_status(db: Database, status: str) -> int:
    return int(await db.fetchval(
        "SELECT COUNT(*) FROM webhook_deliveries WHERE status = $1", status) or 0)


async def throughput(url: str, ports: list[int], subs: int, deliveries: int,
                     config: DeliveryConfig) -> tuple[float, int, float, float | None]:
    """(deliveries/s, failed attempts, CPU µs per delivery, that of the PostgreSQL
    backends or None on SQLite) of one worker draining ``deliveries`` due rows."""
    urls = [f"http://127.0.0.1:{ports[i % len(ports)]}/ok" for i in range(subs)]
    db, active, dispatcher = await setup(url, urls, config)
    store = DeliveryStore(db)
    events = [NewEvent(e.event_id, EVENT_TYPE, encode(e), active)
              for e in (event() for _ in range(max(1, deliveries // subs)))]
    total = len(events) * subs
    await store.record_events(events, time.time())
    stop = asyncio.Event()
    backends = await backend_cpu(db)
    started = time.perf_counter()
    cpu = time.process_time()
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
    served = sum(t - backends.get(pid, 0.0) for pid, t in (await backend_cpu(db)).items())
    failed = int(await db.fetchval(
        "SELECT COUNT(*) FROM webhook_attempts WHERE status_code IS NULL"
        " OR status_code < 200 OR status_code >= 300") or 0)
    failed += total - await count_status(db, "success")
    stop.set()
    await runner
    await dispatcher.attempts.sender.close()
    await db.close()
    return (total / elapsed, failed, cpu / total * 1e6,
            served / total * 1e6 if db.dialect == "postgresql" else None)


def delivery_sized_body() -> bytes:
    """A body the size of a real delivery's, for the loops without bookkeeping."""
    return (b'{"event":' + encode(event()) + b',"signature":"' + b"0" * 64
            + b'","delivered_at":"x"}')


async def bare_post_loop(ports: list[int], count: int, concurrency: int
                         ) -> tuple[float, int, float]:
    """The limit: ``count`` POSTs of a delivery-sized body over one keep-alive session,
    ``concurrency`` at a time, to the same receivers; (POSTs/s, non-2xx or errors, CPU µs
    per POST)."""
    body = delivery_sized_body()
    urls = [f"http://127.0.0.1:{ports[i % len(ports)]}/ok" for i in range(count)]
    errors = 0
    queue = iter(urls)

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal errors
        for target in queue:
            try:
                async with session.post(target, data=body, headers={
                        "Content-Type": "application/json"}) as resp:
                    await resp.read()
                    errors += not 200 <= resp.status < 300
            except aiohttp.ClientError:
                errors += 1

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        cpu = time.process_time()
        await asyncio.gather(*(client(session) for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
    return count / elapsed, errors, cpu / count * 1e6


async def bare_client_loop(ports: list[int], count: int, concurrency: int
                           ) -> tuple[float, int, float]:
    """The same loop over the worker's own HTTP client (monitor/webhooks/http1.py) with no
    bookkeeping: what the worker's database cycle and dispatch cost on top of its sends.
    Printed next to the limit, not the limit: the issue's limit is the aiohttp loop."""
    body = delivery_sized_body()
    targets = iter([URL(f"http://127.0.0.1:{ports[i % len(ports)]}/ok") for i in range(count)])
    headers = header_lines([("Content-Type", "application/json")])
    errors = 0
    client = Http1Client(allow_loopback=True, max_idle_per_origin=concurrency)

    async def one() -> None:
        nonlocal errors
        for target in targets:
            try:
                errors += not 200 <= await client.post(target, headers, body) < 300
            except OSError:
                errors += 1

    started = time.perf_counter()
    cpu = time.process_time()
    await asyncio.gather(*(one() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    await client.close()
    return count / elapsed, errors, cpu / count * 1e6


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
    other_attempts = await db.fetchval(
        "SELECT COUNT(*) FROM webhook_attempts a JOIN webhook_deliveries d"
        " ON d.id = a.delivery_id WHERE d.subscription_id <> $1", healthy.id)
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
    return Latency(statistics.quantiles(latencies, n=100)[98], run.cpu_seconds / run.sent * 1e6,
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


#: Neighbours of the healthy endpoint in the isolation runs: (receiver path, the
#: adjective that names it, what the row adds about it). "hang" was the only one; the
#: others are the receivers a subscriber more often has: one down behind a proxy (503 at
#: once, so every event brings retries and their history rows), and one that answers
#: after a second; "flap" one that fails every other request (a flaky proxy or a
#: deploy in progress), which moves it in and out of the dispatcher's probe, and "flaky"
#: one that fails a third of its requests at random (often two successes in a row);
#: "slowflaky" answers after two event intervals (0.2 s at ``--rate 10``, 0.04 s at the
#: default 50) and fails a fifth at random: what the probe costs a receiver that needs
#: its slots (at any rate its 1.25 attempts per event need ~2.5 sends in flight; probed
#: after a failure it has one). "busy" is the same receiver never failing: what a
#: neighbour that keeps ~2 sends in flight costs it, probe or not. Its answers come back
#: in step with the events (two intervals after its send); "offbeat" answers after 2.35
#: intervals instead, between them: the two side by side say how much of "busy"'s cost
#: is that timing (docs/performance.md, forty-second pass). ``{after}`` and
#: ``{offbeat}`` in a path or description are those delays (:func:`delays`).
NEIGHBOURS = {"hang": ("hang", "hanging", ""), "fail": ("fail", "failing", " (503 at once)"),
              "slow": ("slow", "slow", " (answers after 1 s)"),
              "flap": ("flap", "flapping", " (503 and 200 in turn)"),
              "flaky": ("flaky", "flaky", " (503 to a third of requests, at random)"),
              "slowflaky": ("slowflaky?after={after}", "slow flaky",
                            " (answers after {after} s, 503 to a fifth, at random)"),
              "busy": ("slowflaky?after={after}&fail=0", "busy",
                       " (answers after {after} s, never fails)"),
              "offbeat": ("slowflaky?after={offbeat}&fail=0", "off-beat busy",
                          " (answers after {offbeat} s, between events, never fails)")}


def delays(rate: float) -> dict[str, str]:
    """The neighbours' answer delays at ``rate`` events/s, by placeholder: ``after`` two
    event intervals, ``offbeat`` 2.35."""
    return {"after": f"{2 / rate:g}", "offbeat": f"{2.35 / rate:g}"}


def neighbour_url(port: int, kind: str, rate: float) -> str:
    """The receiver ``kind`` (a key of NEIGHBOURS) answers at, for ``rate`` events/s."""
    return f"http://127.0.0.1:{port}/" + NEIGHBOURS[kind][0].format(**delays(rate))


def worker_config() -> DeliveryConfig:
    """The benchmarks' worker: loopback receivers, a 2 s timeout, retries after 0.5-2 s.
    ``poll_interval_seconds`` is left at its default: new deliveries wake the worker (as
    the intake does), so the poll only finds retries coming due."""
    return DeliveryConfig(allow_loopback=True, secret_encryption_key=KEY, timeout_seconds=2.0,
                          backoff_base_seconds=0.5, backoff_max_seconds=2.0)


def neighbour_kinds(value: str) -> list[str]:
    kinds = [k for k in value.split(",") if k]
    unknown = sorted(set(kinds) - set(NEIGHBOURS))
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(
            f"unknown neighbour {', '.join(unknown) or '(none given)'}: choose from "
            + ", ".join(NEIGHBOURS))
    return list(dict.fromkeys(kinds))


async def isolation(args: argparse.Namespace, ports: list[int], tmp: Path,
                    config: DeliveryConfig, db_name: str) -> None:
    """The healthy endpoint's p99 alone, next to another healthy endpoint (the baseline)
    and next to each of ``--neighbours``: one table row per neighbour."""
    alone = await healthy_p99(await fresh_url(args.storage_url, tmp), ports[-1], None,
                              args.seconds, args.rate, config)
    # A p99 of ~400 latencies is the 4th worst: one scheduler hiccup on a shared machine
    # moves it by half (one run read 0.17, another 1.25). So the cases below run
    # --isolation-rounds times, rotating which goes first, and each ratio is of the
    # medians. The other endpoint is another receiver port (its own endpoint key); the
    # baseline sends it the same traffic but it answers, so the runs differ only in how
    # that receiver answers.
    cases = [("healthy", f"http://127.0.0.1:{ports[0]}/ok")] + [
        (NEIGHBOURS[k][1], neighbour_url(ports[0], k, args.rate)) for k in args.neighbours]
    runs: dict[str, list[Latency]] = {name: [] for name, _ in cases}
    for n in range(args.isolation_rounds):
        shift = n % len(cases)
        for name, other in cases[shift:] + cases[:shift]:
            run = await healthy_p99(await fresh_url(args.storage_url, tmp), ports[-1],
                                    other, args.seconds, args.rate, config)
            runs[name].append(run)
            print(f"  isolation round {n + 1} + {name} endpoint: healthy p99 "
                  f"{run.p99_ms:6.1f} ms; this process {run.cpu_us:6.0f} µs CPU and "
                  f"{run.cycles:4.2f} cycles per event", flush=True)
    base = [r.p99_ms for r in runs["healthy"]]
    per_cpu = {k: statistics.median(r.cpu_us for r in v) for k, v in runs.items()}
    per_cycles = {k: statistics.median(r.cycles for r in v) for k, v in runs.items()}
    print(f"per event (medians): CPU µs alone {alone.cpu_us:.0f}, "
          + ", ".join(f"+ {k} {v:.0f}" for k, v in per_cpu.items())
          + f"; cycles alone {alone.cycles:.2f}, "
          + ", ".join(f"+ {k} {v:.2f}" for k, v in per_cycles.items()))
    for kind in args.neighbours:
        _, adjective, how = NEIGHBOURS[kind]
        how = how.format(**delays(args.rate))
        loaded = [r.p99_ms for r in runs[adjective]]
        ratio = statistics.median(loaded) / statistics.median(base)
        print(f"healthy p99 latency (ms, medians): alone={alone.p99_ms:6.1f}  "
              f"+ healthy endpoint={statistics.median(base):6.1f}  "
              f"+ {adjective} endpoint={statistics.median(loaded):6.1f}  "
              f"ratio {adjective}/healthy={ratio:4.2f} (target <= 1.2)")
        emit(f"healthy endpoint p99 next to a {adjective} one{how} ({db_name})", unit="ms",
             limit_name="same traffic, other endpoint healthy", limit=base,
             project=loaded, ratio=ratio, target="<= 1.2x",
             met=ratio <= 1.2, note=f"alone {alone.p99_ms:.1f} ms; medians of "
             f"{args.isolation_rounds} p99s each; this process's CPU per event (worker "
             f"and event inserts) next to a healthy / a {adjective} endpoint "
             f"{per_cpu['healthy']:.0f} / {per_cpu[adjective]:.0f} µs, cycles per event "
             f"{per_cycles['healthy']:.2f} / {per_cycles[adjective]:.2f}")


async def main(args: argparse.Namespace) -> None:
    configure_logging(level=args.log_level, fmt=args.log_format)
    proc, ports = start_receivers(args.endpoints + 1)
    # The delivery service applies its [gc] policy once it has started
    # (consumers/delivery.py): the worker here runs as that service does, and the bare
    # loops beside it in this process run under the same policy.
    gc_applied = apply_gc_policy(GcConfig())
    config = worker_config()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            print(machine_line())
            print(f"gc: the delivery service's policy (thresholds {list(gc_applied.thresholds)},"
                  f" {gc_applied.frozen:,} objects frozen)")
            print(f"storage: {args.storage_url or 'sqlite (temp file)'}; "
                  f"receivers: {args.endpoints} ports; max_concurrency "
                  f"{config.max_concurrency}, per endpoint {config.per_endpoint_concurrency}")
            subs, deliveries = 100, args.deliveries
            # The same concurrency as the worker can reach: its overall bound, or the
            # per-endpoint bound times the endpoints, whichever is lower.
            in_flight = min(config.max_concurrency,
                            config.per_endpoint_concurrency * (len(ports) - 1))
            bare: list[float] = []
            worker: list[float] = []
            # CPU time of this process (receivers run in a child) per delivery: on a
            # shared machine it moves far less with the load than the rates do.
            own: list[float] = []
            cpu: dict[str, list[float]] = {"bare": [], "worker": [], "client": []}
            backend: list[float] = []  # the PostgreSQL backends' CPU per delivery
            errors = 0
            for n in range(args.rounds):
                # Rotate which goes first, so none always meets the warmer machine.
                order = [("bare", "worker", "client"), ("worker", "client", "bare"),
                         ("client", "bare", "worker")][n % 3]
                for which in order:
                    if which == "bare":
                        rate, bad, used = await bare_post_loop(ports[:-1], deliveries,
                                                               in_flight)
                        bare.append(rate)
                    elif which == "client":
                        rate, bad, used = await bare_client_loop(ports[:-1], deliveries,
                                                                 in_flight)
                        own.append(rate)
                    else:
                        rate, bad, used, served = await throughput(
                            await fresh_url(args.storage_url, Path(tmp)), ports[:-1], subs,
                            deliveries, config)
                        worker.append(rate)
                        if served is not None:
                            backend.append(served)
                    errors += bad
                    cpu[which].append(used)
                    print(f"  round {n + 1} {which:<6} {rate:8.1f}/s  errors {bad}"
                          f"  cpu {used:6.1f} µs each"
                          + (f", backends {backend[-1]:6.1f}" if which == "worker" and backend
                             else ""), flush=True)
            print(show("bare POST loop", bare, "POSTs/s"))
            print(show("delivery worker", worker, "deliveries/s"))
            print(show("bare loop, worker's client", own, "POSTs/s"))
            ratio = statistics.median(worker) / statistics.median(bare)
            print(f"worker / bare POST loop (medians): {ratio:.2f}  "
                  f"(target >= 0.8 and >= 2,000/s)")
            cpu_ratio = statistics.median(cpu["bare"]) / statistics.median(cpu["worker"])
            print(f"CPU µs per delivery (medians): worker {statistics.median(cpu['worker']):.1f}"
                  f", bare {statistics.median(cpu['bare']):.1f}; bare / worker {cpu_ratio:.2f}"
                  + (f"; PostgreSQL backends {statistics.median(backend):.1f}" if backend else ""))
            fail_on_errors(errors, "the throughput rounds")
            db_name = "PostgreSQL" if args.storage_url else "SQLite"
            emit(f"webhook deliveries/s, one worker, loopback receiver ({db_name})",
                 unit="deliveries/s", limit_name="bare aiohttp POST loop, same receivers",
                 limit=bare, project=worker, ratio=ratio, target=">= 2,000/s and >= 0.8",
                 met=ratio >= 0.8 and statistics.median(worker) >= 2000,
                 note=f"CPU per delivery bare/worker {cpu_ratio:.2f}; the worker sends with its "
                      f"own HTTP/1.1 client: the same loop over that client (no bookkeeping) "
                      f"{statistics.median(own):,.0f} POSTs/s, worker/that "
                      f"{statistics.median(worker) / statistics.median(own):.2f}")
            if args.isolation_rounds <= 0:
                return  # throughput only (A/B runs of the cycle)
            await isolation(args, ports, Path(tmp), config, db_name)
    finally:
        proc.terminate()
        proc.wait()
        await drop_created()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--storage-url", help="default: a temporary SQLite file per run; a "
                        "postgresql:// URL names a server database used to create (and drop) "
                        "one fresh database per run")
    parser.add_argument("--endpoints", type=int, default=8, help="receiver ports")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (>= 3)")
    parser.add_argument("--deliveries", type=int, default=20000, help="per round (long enough "
                        "that the 50 ms completion poll is ~1%% of a round)")
    parser.add_argument("--seconds", type=float, default=8.0, help="latency run length")
    parser.add_argument("--rate", type=float, default=50.0, help="events/s in latency runs")
    parser.add_argument("--isolation-rounds", type=int, default=5, help="runs of each "
                        "latency case (healthy neighbour / each --neighbours), interleaved; "
                        "each ratio is of the medians of their p99s (0: the throughput rows "
                        "only)")
    parser.add_argument("--neighbours", default="hang",
                        type=neighbour_kinds,
                        help="comma-separated neighbours of the healthy endpoint in the "
                        "isolation runs, one row each: hang (the table's row; never "
                        "answers), fail (503 at once), slow (answers after 1 s), flap "
                        "(503 and 200 in turn), flaky (503 to a third of requests, at random), "
                        "slowflaky (answers after two event intervals: 0.2 s at --rate 10; "
                        "503 to a fifth, at random), busy (the same, never failing), "
                        "offbeat (busy, answering after 2.35 intervals: between events)")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"],
                        help="the worker's log level (default info, the configuration's "
                             "default; the lines go to stderr)")
    parser.add_argument("--log-format", default="json", choices=["console", "json"],
                        help="the worker's log format (default json: as a deployed worker "
                             "writes it, not to a terminal)")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.serve:
        asyncio.run(_serve(ns.serve))
    else:
        asyncio.run(main(ns))
