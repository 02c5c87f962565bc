"""``depeg-monitor run``: everything in one process, for a single machine.

With no ``kafka.bootstrap_servers`` it starts the embedded Tansu broker on loopback
(memory-only; its records and offsets are journaled to SQLite in the data directory and put
back on the next start, ``monitor/kafka/journal.py``), creates the topics, then starts every
service registered in the ``depeg_monitor.services`` entry-point group (the monitor first,
then the consumers of its topics and the HTTP API) and logs where each listens. Ctrl-C or
SIGTERM sets one stop event: every service finishes its in-flight work (the monitor its
batch, state write and offset commit), then the broker child process is stopped and reaped.
A second Ctrl-C cancels what is still running.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import Any

import msgspec
from aiokafka.errors import KafkaError

from . import health, preflight, runstate
from .commands import with_bootstrap_servers
from .config import Config
from .daemon.retry import Aborted, Backoff, retry
from .earlystop import hand_over
from .kafka.embedded import EmbeddedBroker
from .kafka.journal import FILE_NAME as JOURNAL_FILE
from .kafka.journal import Journal, JournalError, topics_in_order
from .kafka.topics import ensure_topics, ensure_vault_topics
from .logs import get_logger
from .paths import data_dir
from .services import Service, StartupError, discover_services

log = get_logger(__name__)

#: How often the embedded broker's journal copies new records (what a kill -9 can lose).
JOURNAL_INTERVAL_SECONDS = 1.0
#: How long a stop waits for a journal cycle under way before cancelling it.
JOURNAL_STOP_SECONDS = 10.0

async def run_all(config: Config, only: set[str] | None = None,
                  stop: asyncio.Event | None = None) -> int:
    """Start the broker (if needed), ensure topics, run services until ``stop``."""
    stop = stop or asyncio.Event()
    services = [s for s in discover_services() if only is None or s.name in only]
    if not services:
        log.error("run.no_services", only=sorted(only or []))
        return 2
    problem = preflight.check(config, embedded=not config.kafka.bootstrap_servers,
                              api="api" in {s.name for s in services})
    if problem is not None:
        log.error(problem.event, **problem.fields)
        return 2
    broker: EmbeddedBroker | None = None
    if not config.kafka.bootstrap_servers:
        broker = EmbeddedBroker(port=config.kafka.embedded_port)
        await broker.astart()
        log.info("run.embedded_broker", bootstrap_servers=broker.bootstrap_servers,
                 note="memory-only Tansu broker; its records and offsets are journaled to "
                      "the data directory and put back on the next start")
        config = msgspec.structs.replace(config, kafka=msgspec.structs.replace(
            config.kafka, bootstrap_servers=broker.bootstrap_servers))
    state = runstate.new_state(config, embedded=broker is not None)
    try:
        if not await _ensure_topics(config, stop):
            return 0  # stopped before the broker ever answered
        path = runstate.write_state(config, state)
        log.info("run.state_written", path=str(path), api_url=state.api_url,
                 metrics_url=state.api_url + "/metrics",
                 note="produce, status and the other commands find this run through it")
        try:
            journal = await _open_journal(config) if broker is not None else None
        except JournalError as exc:
            log.error("run.journal_mismatch", error=str(exc))
            return 2
        copier = asyncio.create_task(_keep_journal(journal, stop)) if journal else None
        broker_ready = health.broker_check(config.kafka.bootstrap_servers)
        watch = asyncio.create_task(_watch_broker(broker, stop)) if broker else None
        with health.checking("run.broker", broker_ready):
            code = await _supervise(config, services, stop)
        if copier is not None and journal is not None:
            # The copier returns at its next check of ``stop``; a cycle it is in the middle
            # of must end (or be cancelled) before the final one starts: two cycles at
            # once on the same clients undid each other's reads.
            await _stop_copier(copier)
            await _final_journal_cycle(journal, broker)
        if watch is not None:
            watch.cancel()
            if broker is not None and broker.process is not None \
                    and broker.process.poll() is not None:
                return 1  # the embedded broker died under us (logged by the watcher)
        return code
    finally:
        runstate.remove_state(config, state.pid)
        if broker is not None:
            await broker.astop()
            log.info("run.embedded_broker_stopped")


async def _open_journal(config: Config) -> Journal:
    """The embedded broker's journal (``monitor/kafka/journal.py``): seed the fresh
    broker with what the previous run left, before any service starts."""
    k, v = config.kafka, config.vaults
    path = data_dir(config) / JOURNAL_FILE
    journal = Journal(k, path, {k.monitor_group: [k.ticks_topic],
                                k.delivery_group: [k.tier_changes_topic],
                                k.store_group: [k.ratings_topic, k.tier_changes_topic,
                                                v.facts_topic, v.ratings_topic],
                                v.group: [v.facts_topic]},
                      topics=topics_in_order(k, v))
    seeded = await journal.seed()
    log.info("run.journal_restored" if seeded else "run.journal_empty", path=str(path),
             records=seeded,
             note="topics and consumer offsets of the previous run put back" if seeded
             else "nothing to restore; every record will be journaled from now on")
    return journal


async def _keep_journal(journal: Journal, stop: asyncio.Event) -> None:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), JOURNAL_INTERVAL_SECONDS)
        if stop.is_set():
            return  # the final cycle runs once every service has stopped
        try:
            copied = await journal.cycle()
            log.debug("run.journal_cycle", records=copied)
        except (KafkaError, OSError) as exc:
            log.warning("run.journal_failed", error=f"{type(exc).__name__}: {exc}"[:300])


async def _stop_copier(copier: asyncio.Task[None]) -> None:
    """Let the copier's current cycle finish (bounded), else cancel it; either way it is
    over when this returns."""
    await asyncio.wait({copier}, timeout=JOURNAL_STOP_SECONDS)
    if not copier.done():
        copier.cancel()
        await asyncio.wait({copier})
    if not copier.cancelled() and (exc := copier.exception()) is not None:
        log.error("run.journal_failed", error=f"{type(exc).__name__}: {exc}"[:300])


async def _final_journal_cycle(journal: Journal, broker: EmbeddedBroker | None) -> None:
    """After the services committed their last offsets: copy the rest, then close."""
    try:
        if broker is not None and broker.process is not None \
                and broker.process.poll() is None:
            copied = await asyncio.wait_for(journal.cycle(whole=True), 60)
            # What an operator checks after a stop: this save, everything this run copied,
            # and what the next start will put back.
            held = await asyncio.to_thread(journal.store.count)
            log.info("run.journal_saved", records=copied, copied_this_run=journal.copied,
                     records_held=held, path=str(journal.store.path))
    except (KafkaError, OSError, TimeoutError) as exc:
        log.error("run.journal_incomplete", error=f"{type(exc).__name__}: {exc}"[:300],
                  note="the next start restores the previous journal cycle")
    finally:
        await journal.aclose()


async def _watch_broker(broker: EmbeddedBroker, stop: asyncio.Event) -> None:
    """The embedded broker is memory-only: if its process dies, every topic, offset and
    state record in it is gone. Say so and stop everything (exit non-zero) rather than
    let the clients reconnect to nothing."""
    while not stop.is_set():
        await asyncio.sleep(1.0)
        proc = broker.process
        if proc is not None and proc.poll() is not None:
            log.error("run.embedded_broker_died", returncode=proc.returncode,
                      note="its topics and offsets are gone; stopping every service")
            stop.set()
            return


async def _ensure_topics(config: Config, stop: asyncio.Event) -> bool:
    """Create the topics (the vault daemon's too: the journal copies them), retrying with
    backoff while the broker is unreachable."""
    k = config.kafka
    backoff = Backoff(k.retry_backoff_seconds, k.retry_backoff_max_seconds)
    try:
        await retry(lambda: ensure_topics(k), what="ensure_topics", backoff=backoff,
                    abort=stop.is_set, retry_on=(KafkaError, OSError))
        await retry(lambda: ensure_vault_topics(k, config.vaults), what="ensure_vault_topics",
                    backoff=backoff, abort=stop.is_set, retry_on=(KafkaError, OSError))
    except Aborted:
        return False
    return True


async def _supervise(config: Config, services: list[Service], stop: asyncio.Event) -> int:
    async def run_one(service: Service) -> None:
        await service.run(config, stop)

    tasks: dict[asyncio.Task[Any], Service] = {}
    for service in services:  # in order: the monitor before the consumers of its topics
        tasks[asyncio.create_task(run_one(service), name=service.name)] = service
        log.info("run.service_started", service=service.name)
    stopper: asyncio.Task[Any] = asyncio.create_task(stop.wait())
    failed = False
    misconfigured = False
    pending = set(tasks)
    while pending:
        done, _ = await asyncio.wait(pending | {stopper}, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task is stopper:
                continue
            pending.discard(task)
            name = tasks[task].name
            exc = task.exception() if not task.cancelled() else None
            if isinstance(exc, StartupError):
                failed = misconfigured = True  # a clear message already; no traceback
                log.error("run.service_failed", service=name, error=str(exc),
                          note="configuration: stopping every service, exit 2")
            elif exc is not None:
                failed = True
                log.error("run.service_failed", service=name,
                          error=f"{type(exc).__name__}: {exc}", exc_info=exc,
                          note="stopping every service, exit 1 (a supervisor restarts run)")
            elif not stop.is_set():
                # A service returns only once stopped: anything else is a failure too.
                log.error("run.service_exited", service=name,
                          note="returned without being stopped: stopping every service, "
                               "exit 1 (a supervisor restarts run)")
            else:
                log.info("run.service_stopped", service=name)
            if not stop.is_set():
                stop.set()  # one service down: stop the others cleanly, exit non-zero
                failed = True
        if stopper in done and pending:
            log.info("run.stopping", waiting_for=sorted(tasks[t].name for t in pending))
            stopper = asyncio.create_task(asyncio.Event().wait())  # wait on services only
    stopper.cancel()
    # README "Exit codes": 2 = a service named a setting to fix, 1 = one crashed or quit.
    return 2 if misconfigured else 1 if failed else 0


def run_command(args: argparse.Namespace, config: Config) -> int:
    # No discovery: `run` starts its own broker rather than attach to another run's.
    config = with_bootstrap_servers(config, args.bootstrap_servers, discover=False)
    if args.port is not None:
        config = msgspec.structs.replace(
            config, api=msgspec.structs.replace(config.api, port=args.port))
    only = {s.strip() for s in args.only.split(",") if s.strip()} if args.only else None

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        current = asyncio.current_task()

        def on_signal() -> None:
            if stop.is_set() and current is not None:
                log.warning("run.forced_stop")
                current.cancel()  # second Ctrl-C: stop waiting for in-flight work
            stop.set()

        asked = hand_over(loop, on_signal)
        if asked is not None:  # a stop while it was starting (earlystop.py)
            log.info("run.stopped_before_start", signal=asked)
            return 0
        return await run_all(config, only, stop)

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        return 130

