"""When webhook-delivery metrics change.

Every Prometheus metric is declared in ``monitor/metrics.py`` (docs/metrics.md, "Delivery");
this module only says *when* they change, so the dispatcher, the worker and the API call
one small function each.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any

from .. import metrics as m

#: Delivery statuses the metrics module counts (``cancelled`` is ours and not counted).
_COUNTED_STATUSES = frozenset({"pending", "success", "failed", "max_retries_exceeded"})


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


#: Labelled children looked up once: ``labels()`` validates and locks on every call
#: (a few µs, several times per send). The metrics are module constants, never replaced.
_attempt_counters: dict[str, Any] = {}
_status_counters: dict[str, Any] = {}


def send_started() -> None:
    """A POST is about to go out; pair with :func:`send_finished` (in a ``finally``)."""
    m.DELIVERIES_IN_FLIGHT.inc()


def send_finished() -> None:
    m.DELIVERIES_IN_FLIGHT.dec()


def attempt(status_code: int | None, error: str | None, seconds: float) -> None:
    label = outcome(status_code, error)
    counter = _attempt_counters.get(label)
    if counter is None:
        counter = _attempt_counters[label] = m.DELIVERY_ATTEMPTS.labels(label)
    counter.inc()
    m.ATTEMPT_SECONDS.observe(seconds)


def observe_many(histogram: Any, amounts: Sequence[float]) -> None:
    """``histogram.observe(a)`` for each of ``amounts``, each bucket and the sum
    incremented once.

    ``observe`` takes a lock, walks the buckets in Python and takes another lock, ~2 µs
    per value, twice per delivery in the worker. This uses the (unlabelled) histogram's
    bucket bounds and values, which prometheus_client keeps as ``_upper_bounds``,
    ``_buckets`` and ``_sum`` (0.x); a histogram without them is observed value by value.
    tests/webhooks/test_send_path_batching.py checks the exposition against ``observe``."""
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    total = getattr(histogram, "_sum", None)
    if (bounds is None or buckets is None or total is None or len(bounds) != len(buckets)
            or histogram._labelnames):
        for amount in amounts:
            histogram.observe(amount)
        return
    if not amounts:
        return
    counts = [0] * len(bounds)
    last = len(bounds)
    for amount in amounts:
        # observe() counts a value in the first bucket whose bound is >= it.
        i = bisect_left(bounds, amount)
        if i < last:
            counts[i] += 1
    total.inc(sum(amounts))
    for i, n in enumerate(counts):
        if n:
            buckets[i].inc(n)


def attempts_finished(results: Iterable[tuple[int | None, str | None, float]]) -> None:
    """:func:`attempt` for a cycle's worth of (status code, error, seconds): each
    outcome's counter is incremented once per cycle, not once per attempt."""
    counts: dict[str, int] = {}
    seconds_all = []
    for status_code, error, seconds in results:
        label = outcome(status_code, error)
        counts[label] = counts.get(label, 0) + 1
        seconds_all.append(seconds)
    observe_many(m.ATTEMPT_SECONDS, seconds_all)
    for label, n in counts.items():
        counter = _attempt_counters.get(label)
        if counter is None:
            counter = _attempt_counters[label] = m.DELIVERY_ATTEMPTS.labels(label)
        counter.inc(n)


def status(new_status: str, count: int = 1) -> None:
    if new_status in _COUNTED_STATUSES and count:
        counter = _status_counters.get(new_status)
        if counter is None:
            counter = _status_counters[new_status] = m.DELIVERIES.labels(new_status)
        counter.inc(count)
        if new_status == "failed":
            m.RETRIES_SCHEDULED.inc(count)


def delivered(latency_seconds: float) -> None:
    """A delivery succeeded ``latency_seconds`` after it was created (retries included)."""
    m.DELIVERY_LATENCY.observe(max(0.0, latency_seconds))


def delivered_many(latencies: Sequence[float]) -> None:
    """:func:`delivered` for a cycle's successes."""
    observe_many(m.DELIVERY_LATENCY, [max(0.0, x) for x in latencies])


def in_flight(count: int, probed: int) -> None:
    """The worker's POSTs in flight and the receivers it probes, set by its dispatcher
    once per cycle (its sends do not count themselves: :func:`send_started` and
    :func:`send_finished` took a lock each per send)."""
    m.DELIVERIES_IN_FLIGHT.set(count)
    m.PROBED_ENDPOINTS.set(probed)


def deliveries_created(count: int) -> None:
    """New pending deliveries, each charged 1 CU."""
    if count:
        m.DELIVERIES.labels("pending").inc(count)
        m.CU_CONSUMED.labels("delivery").inc(count)


def undecodable() -> None:
    m.RECORDS_UNDECODABLE.labels("deliver").inc()


def backlog(retry_backlog: int, failing_endpoints: int) -> None:
    m.RETRY_BACKLOG.set(retry_backlog)
    m.FAILING_ENDPOINTS.set(failing_endpoints)


def consumer(assigned: int, lag: dict[int, int], batch_seconds: float | None,
             connected: bool) -> None:
    """The delivery worker's Kafka consumer, after each fetch."""
    m.consumer_progress("deliver", assigned, lag, batch_seconds, connected)
