"""The worker's log of its attempts: summaries per interval, not a line per attempt.

A failing endpoint warns with its first failed attempt per interval, then one summary;
successes are summed up in one info line. Checked two ways: the pure
:class:`~monitor.webhooks.attemptlog.FailedAttemptLog` against properties of any sequence
of failures (nothing lost, at most one full warning per endpoint and interval, a failure
after a quiet interval always logged in full, summaries on time), and a real worker
sending to real receivers, two failing and one healthy, its JSON log lines counted
against the receivers' own count of requests.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import example, given
from hypothesis import strategies as st

from monitor.config import DeliveryConfig
from monitor.logs import configure_logging
from monitor.storage import Database
from monitor.webhooks.attemptlog import FailedAttemptLog, FailureSummary
from monitor.webhooks.secrets import SecretBox
from tests.webhook_support import (
    ENCRYPTION_KEY,
    attempt_history,
    queue_for_new_subscription,
    receiver,
    running_dispatcher,
    wait_until,
)

_EVENTS = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]),
                             st.sampled_from([0.0, 0.25, 1.0, 2.5, 5.0, 60.0]),
                             st.booleans()), max_size=60)


@given(_EVENTS, st.sampled_from([0.0, 1.0, 5.0, 60.0]))
@example([("a", 0.0, False), ("a", 0.25, False), ("a", 0.75, True)], 1.0)
def test_every_failure_is_a_warning_or_counted_in_one_summary(
        events: list[tuple[str, float, bool]], interval: float) -> None:
    """Failures at increasing times, the worker's summary check (``due``) now and then."""
    failures = FailedAttemptLog(interval)
    now = 0.0
    full: dict[str, list[float]] = {}
    times: dict[str, list[float]] = {}
    summaries: list[FailureSummary] = []
    checks: list[float] = []
    suppressed_give_ups = 0
    for n, (endpoint, step, check) in enumerate(events):
        now += step
        if check:
            summaries += failures.due(now)
            checks.append(now)
            continue
        times.setdefault(endpoint, []).append(now)
        gave_up = n % 3 == 0
        first, ended = failures.failed(endpoint, now, f"sub-{n % 2}", f"d-{n}", 500, "HTTP 500",
                                       gave_up)
        if ended is not None:
            summaries.append(ended)
        suppressed_give_ups += gave_up and not first
        if first:
            last = full.get(endpoint, [])
            # A failure after a quiet interval is always logged in full, and none closer
            # than the interval to the endpoint's last full line.
            assert not last or now - last[-1] >= interval
            full.setdefault(endpoint, []).append(now)
        else:
            assert now - full[endpoint][-1] < interval
    # A summary still open at the end: no check came once its interval had passed.
    for still_open in failures.close():
        assert all(c - still_open.since < interval for c in checks)
        summaries.append(still_open)
    # The give-ups not logged in full are each counted once.
    assert sum(s.given_up for s in summaries) == suppressed_give_ups
    assert all(s.given_up <= s.failed for s in summaries)
    for endpoint, seen in times.items():
        mine = [s for s in summaries if s.endpoint == endpoint]
        # Nothing lost: each failure is a full line or counted once in a summary.
        assert len(full[endpoint]) + sum(s.failed for s in mine) == len(seen)
        # Each summary counts the failures after its full line and before the next one.
        for s in mine:
            assert s.since in full[endpoint] and s.failed > 0
            later = [t for t in full[endpoint] if t > s.since]
            end = later[0] if later else float("inf")
            assert s.failed == sum(1 for t in seen if s.since <= t < end) - 1
        if interval == 0:
            assert not mine and len(full[endpoint]) == len(seen)


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    stream = io.StringIO()
    structlog.reset_defaults()
    yield stream
    structlog.reset_defaults()
    root.handlers[:], level = saved
    root.setLevel(level)


@pytest.mark.parametrize(("level", "interval"), [("info", 3600.0), ("debug", 3600.0),
                                                 ("info", 0.0)])
async def test_a_worker_sums_up_its_attempts_per_interval(
        webhook_db: Database, log_lines: io.StringIO, level: str, interval: float) -> None:
    configure_logging(level, "json", stream=log_lines)
    config = DeliveryConfig(allow_loopback=True, secret_encryption_key=ENCRYPTION_KEY,
                            max_attempts=1, attempt_log_seconds=interval)
    box = SecretBox.from_config(config)
    n = 8  # deliveries per subscription, one subscription per receiver
    async with receiver([500]) as down, receiver([503]) as broken, receiver([200]) as up:
        await queue_for_new_subscription(webhook_db, box, down.url, 0)
        await queue_for_new_subscription(webhook_db, box, broken.url, 0)
        await queue_for_new_subscription(webhook_db, box, up.url, n)
        async with running_dispatcher(webhook_db, config, box):
            async def all_done() -> bool:
                done = await webhook_db.fetchval(
                    "SELECT COUNT(*) FROM webhook_deliveries"
                    " WHERE status IN ('max_retries_exceeded', 'success')")
                return bool(done == 3 * n)

            await wait_until(all_done, what="every delivery sent or given up")
    assert len(down.received) == len(broken.received) == len(up.received) == n
    assert up.answered == [200] * n
    records = [json.loads(line) for line in log_lines.getvalue().splitlines()]
    attempts = [r for r in records if r["event"] == "webhook.attempt"]
    failed = [r for r in attempts if r["outcome"] != "success"]
    succeeded = [r for r in attempts if r["outcome"] == "success"]
    summaries = [r for r in records if r["event"] == "webhook.attempts_failed"]
    delivered = [r for r in records if r["event"] == "webhook.delivered"]
    history = await attempt_history(webhook_db)
    assert len(history) == 3 * n
    # The n successes are read from their deliveries' rows: only failures are history rows.
    assert await webhook_db.fetchval("SELECT COUNT(*) FROM webhook_attempts") == 2 * n
    if interval == 0:  # a line per attempt
        assert [r["level"] for r in failed] == ["warning"] * 2 * n
        assert [r["level"] for r in succeeded] == ["info"] * n
        assert not summaries and not delivered
        return
    # One warning per failing endpoint in full; on stop, one summary each of the rest.
    assert sorted(r["status_code"] for r in failed if r["level"] == "warning") == [500, 503]
    # max_attempts 1: every attempt was its delivery's last.
    assert sorted((s["last_status_code"], s["failed"], s["given_up"], s["subscriptions"],
                   s["level"]) for s in summaries) == [(500, n - 1, n - 1, 1, "warning"),
                                                       (503, n - 1, n - 1, 1, "warning")]
    endpoints = {s["endpoint"] for s in summaries}
    assert endpoints == {down.url.rsplit("/", 1)[0], broken.url.rsplit("/", 1)[0]}
    # The successes: one info line for the interval.
    [summary] = delivered
    assert (summary["delivered"], summary["endpoints"], summary["level"]) == (n, 1, "info")
    assert summary["slowest_ms"] > 0
    # At debug every attempt still has its line.
    if level == "debug":
        assert len(failed) == 2 * n and len(succeeded) == n
        assert {r["level"] for r in succeeded} == {"debug"}
    else:
        assert len(failed) == 2 and not succeeded
