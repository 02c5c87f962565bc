"""Liveness and readiness: one process-wide registry of named readiness checks.

``/healthz`` answers 200 while the event loop runs and no registered liveness check
reports a stuck loop (the monitor's: no loop iteration for ``kafka.liveness_stall_seconds``);
a hung event loop fails it by timeout. ``/readyz`` runs every registered check
concurrently, each bounded by a timeout, and answers 200 only if all pass, else 503 with
every check's detail, so a Kubernetes readiness probe takes a pod out of rotation while its
broker or store is away or its consumer lags past the bound, and an operator can read why.

Components register what they depend on when they start and unregister when they stop::

    health.register_check("store", health.store_check(db))
    health.register_check("broker", health.broker_check(config.kafka.bootstrap_servers))
    health.register_check("consumer:monitor", health.consumer_check("monitor", max_lag))
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from . import metrics
from .api.errors import error_response

#: A readiness check: ``(ok, detail)``; ``detail`` is a short human-readable reason.
Check = Callable[[], Awaitable[tuple[bool, str]]]

#: A check that takes longer than this counts as failed (a probe must answer quickly).
CHECK_TIMEOUT_SECONDS = 2.0

_checks: dict[str, Check] = {}

#: A liveness check: ``(alive, detail)``, synchronous and cheap (no I/O): is a loop of
#: this process stuck? ``/healthz`` fails when any says no.
Liveness = Callable[[], tuple[bool, str]]
_liveness: dict[str, Liveness] = {}


def register_liveness(name: str, check: Liveness) -> None:
    _liveness[name] = check


def unregister_liveness(name: str) -> None:
    _liveness.pop(name, None)


def liveness() -> tuple[bool, dict[str, Any]]:
    """``(all alive, {name: {"ok": bool, "detail": str}})``."""
    report = {}
    for name, check in sorted(_liveness.items()):
        ok, detail = check()
        report[name] = {"ok": bool(ok), "detail": detail}
    return all(r["ok"] for r in report.values()), report


def register_check(name: str, check: Check) -> None:
    """Add or replace the named check (names are unique per process)."""
    _checks[name] = check


def unregister_check(name: str) -> None:
    _checks.pop(name, None)


@contextmanager
def checking(name: str, check: Check) -> Iterator[None]:
    """Register a check for the lifetime of a block (a service's run)."""
    register_check(name, check)
    try:
        yield
    finally:
        unregister_check(name)


def registered_checks() -> list[str]:
    return sorted(_checks)


async def _run_one(check: Check, limit: float) -> tuple[bool, str]:
    try:
        async with asyncio.timeout(limit):
            ok, detail = await check()
    except TimeoutError:
        return False, f"check timed out after {limit:g}s"
    except Exception as exc:  # a crashing check is a failing check, not a 500
        return False, f"check raised {type(exc).__name__}: {str(exc)[:200]}"
    return bool(ok), detail


async def run_checks(limit: float | None = None) -> tuple[bool, dict[str, Any]]:
    """Run every check at once; ``(all ok, {name: {"ok": bool, "detail": str}})``."""
    limit = CHECK_TIMEOUT_SECONDS if limit is None else limit
    names = sorted(_checks)
    results = await asyncio.gather(*(_run_one(_checks[n], limit) for n in names))
    report = {
        n: {"ok": ok, "detail": detail} for n, (ok, detail) in zip(names, results, strict=True)
    }
    return all(ok for ok, _ in results), report


# ---- ready-made checks ------------------------------------------------------------------
class Pingable(Protocol):
    async def ping(self) -> bool: ...


def store_check(db: Pingable) -> Check:
    """The database answers a trivial query."""

    async def check() -> tuple[bool, str]:
        ok = await db.ping()
        return ok, "store reachable" if ok else "store ping failed"

    return check


def idle_check(reason: str) -> Check:
    """A service that runs but has nothing to do (no chain configured, no multi-chain
    asset): ready, and ``/readyz`` says why it is idle instead of leaving it out."""

    async def check() -> tuple[bool, str]:
        return True, f"idle: {reason}"

    return check


def _split_hostport(server: str) -> tuple[str, int]:
    host, _, port = server.strip().rpartition(":")
    return host.strip("[]") or "localhost", int(port or 9092)


def broker_check(bootstrap_servers: str | Callable[[], str]) -> Check:
    """At least one bootstrap server accepts a TCP connection.

    A TCP connect is what a probe can afford every few seconds; the Kafka clients report
    protocol-level health through ``depeg_broker_connected``. The servers may be given as a
    callable because ``run`` learns the embedded broker's port only once it has started.
    """

    async def check() -> tuple[bool, str]:
        servers = bootstrap_servers() if callable(bootstrap_servers) else bootstrap_servers
        errors = []
        for server in filter(None, servers.split(",")):
            host, port = _split_hostport(server)
            try:
                _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
            except (OSError, TimeoutError) as exc:
                errors.append(f"{host}:{port}: {type(exc).__name__}")
                continue
            writer.close()
            return True, f"broker {host}:{port} reachable"
        return False, "no broker reachable: " + ("; ".join(errors) or "none configured")

    return check


def _samples(metric: Any, name: str) -> list[tuple[dict[str, str], float]]:
    return [(s.labels, s.value) for fam in metric.collect() for s in fam.samples if s.name == name]


def consumer_check(consumer: str, max_lag: int) -> Check:
    """The consumer has joined its group (an assignment was reported) and lags at most
    ``max_lag`` records in total, read from the metrics the consumer already maintains.
    """

    async def check() -> tuple[bool, str]:
        assigned = [v for labels, v in _samples(metrics.ASSIGNED_PARTITIONS,
                                                 "depeg_consumer_assigned_partitions")
                    if labels.get("consumer") == consumer]
        if not assigned:
            return False, f"{consumer}: no partition assignment yet"
        lag = sum(v for labels, v in _samples(metrics.CONSUMER_LAG, "depeg_consumer_lag_records")
                  if labels.get("consumer") == consumer)
        detail = f"{consumer}: {int(assigned[0])} partitions, lag {int(lag)} records"
        if lag > max_lag:
            return False, f"{detail} > bound {max_lag}"
        return True, detail

    return check


# ---- HTTP handlers (shared by the ops server and the API app) ---------------------------
async def healthz(_request: web.Request) -> web.Response:
    """200 while the event loop answers and no registered loop reports itself stuck."""
    alive, report = liveness()
    if alive:
        return web.json_response({"status": "ok"})
    return error_response(503, "stuck", checks=report)


async def readyz(_request: web.Request) -> web.Response:
    ok, report = await run_checks()
    if ok:
        return web.json_response({"status": "ready", "checks": report})
    return error_response(503, "not ready", checks=report)


async def metrics_handler(_request: web.Request) -> web.Response:
    body = generate_latest(metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def add_routes(app: web.Application) -> None:
    """GET /healthz, /readyz and /metrics on any aiohttp app."""
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_handler)
