"""Prometheus metrics of webhook delivery (default registry, scraped at /metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

ATTEMPTS = Counter(
    "depeg_webhook_attempts_total",
    "Webhook delivery attempts by result (success, http_error, timeout, blocked, error).",
    ["result"],
)
ATTEMPT_SECONDS = Histogram(
    "depeg_webhook_attempt_duration_seconds",
    "Duration of one webhook POST, from connect to the receiver's answer or the timeout.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
IN_FLIGHT = Gauge("depeg_webhook_in_flight", "Webhook POSTs in flight.")
DELIVERIES_CREATED = Counter(
    "depeg_webhook_deliveries_created_total",
    "Deliveries recorded for matching subscriptions (replays of an event id included once "
    "per batch they arrive in).",
)
FINISHED = Counter(
    "depeg_webhook_deliveries_finished_total",
    "Deliveries that reached a final status (success or max_retries_exceeded).",
    ["status"],
)
REJECTED_EVENTS = Counter(
    "depeg_webhook_rejected_events_total",
    "Records on the tier-change topic that are not valid tier-change events.",
)


def result_label(status_code: int | None, error: str | None) -> str:
    if status_code is not None:
        return "success" if 200 <= status_code < 300 else "http_error"
    if error and error.startswith("timeout"):
        return "timeout"
    if error and error.startswith("blocked"):
        return "blocked"
    return "error"
