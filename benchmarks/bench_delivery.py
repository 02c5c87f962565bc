"""Webhook delivery benchmark: throughput against a bare POST loop, and isolation.

    python benchmarks/bench_delivery.py [--storage-url URL] [--endpoints 8] [--rounds 3]

1. deliveries/s of one worker, from the database to local receivers (each event fans out
   to 100 subscriptions spread over ``--endpoints`` receiver ports, as real subscribers
   have their own hosts), next to its limit: a bare aiohttp POST loop sending the same
   number of same-sized bodies to the same receivers with the same concurrency. The worker
   sends with its own HTTP/1.1 client (monitor/webhooks/http1.py), cheaper than aiohttp's,
   so the same loop over that client runs too and is printed beside them: the worker's
   bookkeeping is the gap to it. The three rotate for ``--rounds`` rounds; the ratio is
   of the medians (target >= 0.8 and >= 2,000/s). The worker starts on an empty
   database, or with ``--history N`` finished deliveries and their attempts stored (a
   service that has run a while); its file reads and writes per delivery are printed
   on SQLite, the bytes PostgreSQL writes to its log per delivery on PostgreSQL. Each
   side's CPU per delivery is also counted over every process it takes (this one, the
   PostgreSQL backends, the receivers' child process): the two cores are shared by all
   of them, so bare / worker of those is the throughput ratio when the cores are the
   bound;
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

Receivers run in a child process (the second core), so the figures are the worker's.
``--neighbour-receiver own`` serves the isolation runs' other endpoint (the healthy
baseline neighbour and each ``--neighbours`` kind) from a second child process: in the
default ``shared`` layout the healthy receiver and its neighbour share one event loop, so
a neighbour that answers late shares the healthy receiver's wake-ups, and a healthy one
answers together with it (docs/performance.md, fifty-third pass). The
Kafka intake is not included: it only inserts rows; this measures matching-to-2xx. Any
failed attempt or non-2xx answer fails the run. The worker logs as a deployed one does:
at the configuration's default level (info), JSON lines to stderr (``--log-level``,
``--log-format``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
from common import emit, fail_on_errors, machine_line, show
from delivery_receivers import NEIGHBOURS, delays, neighbour_kinds, neighbour_url, start_receivers
from delivery_worker import (
    Latency,
    drop_created,
    event,
    fresh_url,
    healthy_p99,
    process_cpu,
    throughput,
    worker_config,
)
from yarl import URL

from monitor.config import DeliveryConfig, GcConfig
from monitor.gcpolicy import apply_gc_policy
from monitor.logs import configure_logging
from monitor.records import encode
from monitor.webhooks.http1 import Http1Client, header_lines


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


async def isolation(args: argparse.Namespace, ports: list[int], tmp: Path,
                    config: DeliveryConfig, db_name: str, other_port: int | None = None
                    ) -> None:
    """The healthy endpoint's p99 alone, next to another healthy endpoint (the baseline)
    and next to each of ``--neighbours``: one table row per neighbour. ``other_port``:
    where the other endpoint is served (default: ``ports[0]``, the healthy receiver's
    process)."""
    port = ports[0] if other_port is None else other_port
    layout = "" if other_port is None else ", its receiver in a process of its own"
    alone = await healthy_p99(await fresh_url(args.storage_url, tmp), ports[-1], None,
                              args.seconds, args.rate, config)
    # A p99 of ~400 latencies is the 4th worst: one scheduler hiccup on a shared machine
    # moves it by half (one run read 0.17, another 1.25). So the cases below run
    # --isolation-rounds times, rotating which goes first, and each ratio is of the
    # medians. The other endpoint is another receiver port (its own endpoint key); the
    # baseline sends it the same traffic but it answers, so the runs differ only in how
    # that receiver answers.
    cases = [("healthy", f"http://127.0.0.1:{port}/ok")] + [
        (NEIGHBOURS[k][1], neighbour_url(port, k, args.rate)) for k in args.neighbours]
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
        emit(f"healthy endpoint p99 next to a {adjective} one{how}{layout} ({db_name})",
             unit="ms",
             limit_name="same traffic, other endpoint healthy", limit=base,
             project=loaded, ratio=ratio, target="<= 1.2x",
             met=ratio <= 1.2, note=f"alone {alone.p99_ms:.1f} ms; medians of "
             f"{args.isolation_rounds} p99s each; this process's CPU per event (worker "
             f"and event inserts) next to a healthy / a {adjective} endpoint "
             f"{per_cpu['healthy']:.0f} / {per_cpu[adjective]:.0f} µs, cycles per event "
             f"{per_cycles['healthy']:.2f} / {per_cycles[adjective]:.2f}")


def every_process(cpu: dict[str, list[float]], backend: list[float],
                  served: dict[str, list[float]]) -> tuple[float, float] | None:
    """CPU µs per delivery of the bare loop and of the worker counting every process a
    delivery takes on this machine: this one, the PostgreSQL backends (the worker's
    alone) and the receivers. Medians per process, added; None without the receivers'
    figures (no /proc). The two cores are shared by all of them, so when they are the
    bound the throughput ratio comes to bare / worker of these."""
    if not served["bare"] or not served["worker"]:
        return None
    bare = statistics.median(cpu["bare"]) + statistics.median(served["bare"])
    worker = (statistics.median(cpu["worker"]) + statistics.median(served["worker"])
              + (statistics.median(backend) if backend else 0.0))
    return bare, worker


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
            # The receivers' child process's CPU per POST, per side: on two cores the
            # client, its database and the receivers share the CPU (every_process below).
            served: dict[str, list[float]] = {"bare": [], "worker": [], "client": []}
            calls: list[float] = []  # the worker's file reads and writes per delivery
            wal: list[float] = []  # PostgreSQL's log bytes per delivery
            errors = 0
            for n in range(args.rounds):
                # Rotate which goes first, so none always meets the warmer machine.
                order = [("bare", "worker", "client"), ("worker", "client", "bare"),
                         ("client", "bare", "worker")][n % 3]
                for which in order:
                    receivers_before = process_cpu(proc.pid)
                    if which == "bare":
                        rate, bad, used = await bare_post_loop(ports[:-1], deliveries,
                                                               in_flight)
                        bare.append(rate)
                    elif which == "client":
                        rate, bad, used = await bare_client_loop(ports[:-1], deliveries,
                                                                 in_flight)
                        own.append(rate)
                    else:
                        drain = await throughput(
                            await fresh_url(args.storage_url, Path(tmp)), ports[:-1], subs,
                            deliveries, config, args.history)
                        rate, bad, used = drain.rate, drain.failed, drain.cpu_us
                        worker.append(rate)
                        if drain.backend_us is not None:
                            backend.append(drain.backend_us)
                        if drain.file_calls is not None:
                            calls.append(drain.file_calls)
                        if drain.wal_bytes is not None:
                            wal.append(drain.wal_bytes)
                    errors += bad
                    cpu[which].append(used)
                    receivers_after = process_cpu(proc.pid)
                    if receivers_before is not None and receivers_after is not None:
                        served[which].append(
                            (receivers_after - receivers_before) / deliveries * 1e6)
                    print(f"  round {n + 1} {which:<6} {rate:8.1f}/s  errors {bad}"
                          f"  cpu {used:6.1f} µs each"
                          + (f", receivers {served[which][-1]:6.1f}" if served[which]
                             else "")
                          + (f", backends {backend[-1]:6.1f}" if which == "worker" and backend
                             else "")
                          + (f", file calls {calls[-1]:.2f} each" if which == "worker" and calls
                             else "")
                          + (f", log {wal[-1]:,.0f} B each" if which == "worker" and wal
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
            every = every_process(cpu, backend, served)
            every_ratio = every[0] / every[1] if every is not None else None
            if every is not None:
                print(f"CPU µs per delivery of every process it takes (this one, "
                      f"{'the PostgreSQL backends, ' if backend else ''}the receivers; "
                      f"medians): worker {every[1]:.1f}, bare {every[0]:.1f}; bare / worker "
                      f"{every_ratio:.2f}: the throughput ratio when the cores are "
                      f"the bound (receivers {statistics.median(served['worker']):.1f} and "
                      f"{statistics.median(served['bare']):.1f} of those)")
            if calls:
                print(f"file reads and writes per delivery, worker process (median): "
                      f"{statistics.median(calls):.2f}  (min {min(calls):.2f}, "
                      f"max {max(calls):.2f})")
            if wal:
                print(f"PostgreSQL log bytes per delivery (median): "
                      f"{statistics.median(wal):,.0f}  (min {min(wal):,.0f}, "
                      f"max {max(wal):,.0f})")
            fail_on_errors(errors, "the throughput rounds")
            db_name = "PostgreSQL" if args.storage_url else "SQLite"
            stored = f", {args.history:,} delivered before" if args.history > 0 else ""
            emit(f"webhook deliveries/s, one worker, loopback receiver ({db_name}{stored})",
                 unit="deliveries/s", limit_name="bare aiohttp POST loop, same receivers",
                 limit=bare, project=worker, ratio=ratio, target=">= 2,000/s and >= 0.8",
                 met=ratio >= 0.8 and statistics.median(worker) >= 2000,
                 note=f"CPU per delivery bare/worker {cpu_ratio:.2f}"
                      + (f", counting every process it takes (receivers"
                         f"{', PostgreSQL backends' if backend else ''}) {every_ratio:.2f}"
                         if every_ratio is not None else "")
                      + "; the worker sends with its "
                      f"own HTTP/1.1 client: the same loop over that client (no bookkeeping) "
                      f"{statistics.median(own):,.0f} POSTs/s, worker/that "
                      f"{statistics.median(worker) / statistics.median(own):.2f}")
            if args.isolation_rounds <= 0:
                return  # throughput only (A/B runs of the cycle)
            # --neighbour-receiver own: the other endpoint from a receiver process of its own.
            other, other_ports = (start_receivers(1) if args.neighbour_receiver == "own"
                                  else (None, [None]))
            try:
                await isolation(args, ports, Path(tmp), config, db_name, other_ports[0])
            finally:
                if other is not None:
                    other.terminate()
                    other.wait()
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
    parser.add_argument("--history", type=int, default=0, help="finished deliveries, one "
                        "attempt each, stored before each worker drain, as a service that "
                        "has run a while keeps them until it prunes (default 0: an empty "
                        "database, the table's rows; the row is named with it otherwise)")
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
    parser.add_argument("--neighbour-receiver", default="shared", choices=["shared", "own"],
                        help="where the isolation runs' other endpoint is served: shared "
                             "(default, the table's rows) with the healthy receiver in one "
                             "child process, or own: a second child process, as a receiver "
                             "on another host has its own (the rows are named so)")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"],
                        help="the worker's log level (default info, the configuration's "
                             "default; the lines go to stderr)")
    parser.add_argument("--log-format", default="json", choices=["console", "json"],
                        help="the worker's log format (default json: as a deployed worker "
                             "writes it, not to a terminal)")
    asyncio.run(main(parser.parse_args()))
