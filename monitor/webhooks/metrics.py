"""Metric updates of webhook delivery, forwarded to the project's one metrics module.

Every Prometheus metric is declared in ``monitor/metrics.py`` (docs/metrics.md, "Delivery");
this module only says *when* they change, so the dispatcher, the worker and the API call
one small function each. ``monitor.metrics`` is looked up at first use: where it is not
installed (a build without the ops module), every update is a no-op.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

_MODULE: Any = None
_LOADED = False

#: Delivery statuses the metrics module counts (``cancelled`` is ours and not counted).
_COUNTED_STATUSES = frozenset({"pending", "success", "failed", "max_retries_exceeded"})


def _m() -> Any:
    global _MODULE, _LOADED
    if not _LOADED:
        _LOADED = True
        try:
            _MODULE = importlib.import_module("monitor.metrics")
        except ImportError:
            _MODULE = None
    return _MODULE


def outcome(status_code: int | None, error: str | None) -> str:
    """The ``outcome`` label of one attempt."""
    if status_code is not None:
        if 200 <= status_code < 300:
            return "success"
        return "http_5xx" if status_code >= 500 else "http_4xx"  # 3xx (never followed): 4xx
    if error and error.startswith("timeout"):
        return "timeout"
    if error and error.startswith("blocked"):
        return "blocked"
    return "connection_error"


@contextlib.contextmanager
def in_flight() -> Iterator[None]:
    m = _m()
    if m is None:
        yield
        return
    with m.DELIVERIES_IN_FLIGHT.track_inprogress():
        yield


def attempt(status_code: int | None, error: str | None, seconds: float) -> None:
    if (m := _m()) is not None:
        m.DELIVERY_ATTEMPTS.labels(outcome(status_code, error)).inc()
        m.ATTEMPT_SECONDS.observe(seconds)


def status(new_status: str, count: int = 1) -> None:
    if (m := _m()) is not None and new_status in _COUNTED_STATUSES and count:
        m.DELIVERIES.labels(new_status).inc(count)
        if new_status == "failed":
            m.RETRIES_SCHEDULED.inc(count)


def delivered(latency_seconds: float) -> None:
    """A delivery succeeded ``latency_seconds`` after it was created (retries included)."""
    if (m := _m()) is not None:
        m.DELIVERY_LATENCY.observe(max(0.0, latency_seconds))


def deliveries_created(count: int) -> None:
    """New pending deliveries, each charged 1 CU."""
    if (m := _m()) is not None and count:
        m.DELIVERIES.labels("pending").inc(count)
        m.CU_CONSUMED.labels("delivery").inc(count)


def management_call() -> None:
    if (m := _m()) is not None:
        m.CU_CONSUMED.labels("management").inc()


def undecodable() -> None:
    if (m := _m()) is not None:
        m.RECORDS_UNDECODABLE.labels("deliver").inc()


def backlog(retry_backlog: int, failing_endpoints: int) -> None:
    if (m := _m()) is not None:
        m.RETRY_BACKLOG.set(retry_backlog)
        m.FAILING_ENDPOINTS.set(failing_endpoints)


def consumer(assigned: int, lag: dict[int, int], batch_seconds: float | None,
             connected: bool) -> None:
    """The delivery worker's Kafka consumer, after each fetch."""
    if (m := _m()) is None:
        return
    m.ASSIGNED_PARTITIONS.labels("deliver").set(assigned)
    for partition, records in lag.items():
        m.CONSUMER_LAG.labels("deliver", str(partition)).set(records)
    if batch_seconds is not None:
        m.BATCH_SECONDS.labels("deliver").observe(batch_seconds)
    m.BROKER_CONNECTED.labels("deliver").set(1 if connected else 0)
