"""At most ``max_attempts`` sends per delivery, however often the worker dies mid-send.

A real ``deliver`` process sends to a real receiver that counts requests and never
answers; each time a request arrives the worker is killed with SIGKILL, and a new one is
started. Before attempts were counted ahead of the send, every restart sent again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from aiohttp import web

from monitor.config import Config
from monitor.kafka.embedded import EmbeddedBroker
from monitor.records import encode
from monitor.storage.deliveries import INTERRUPTED, DeliveryStore, NewEvent
from monitor.storage.webhooks import WebhookStore
from tests.process_support import reap
from tests.webhook_support import (
    ENCRYPTION_KEY,
    api_client,
    cli_command,
    make_config,
    new_key,
    receiver,
    subscribe,
    tier_change,
    wait_until,
)

pytestmark = pytest.mark.broker

MAX_ATTEMPTS = 3  # the rule is the same for the default 5; fewer restarts, shorter test


def _worker(config: Config, log: Path) -> subprocess.Popen[bytes]:
    settings = {
        "DEPEG_STORAGE__URL": config.storage.url,
        "DEPEG_KAFKA__BOOTSTRAP_SERVERS": config.kafka.bootstrap_servers,
        "DEPEG_KAFKA__DELIVERY_GROUP": config.kafka.delivery_group,
        "DEPEG_KAFKA__BATCH_TIMEOUT_MS": "50",
        "DEPEG_DELIVERY__ALLOW_LOOPBACK": "true",
        "DEPEG_DELIVERY__SECRET_ENCRYPTION_KEY": ENCRYPTION_KEY,
        "DEPEG_DELIVERY__MAX_ATTEMPTS": str(MAX_ATTEMPTS),
        "DEPEG_DELIVERY__BACKOFF_BASE_SECONDS": "0.05",
        "DEPEG_DELIVERY__BACKOFF_MAX_SECONDS": "0.1",
        # The receiver never answers: the send would end by this timeout, but the worker
        # is killed first (~0.05 s after the request arrives: the poll below). The claim
        # of a killed worker expires CLAIM_AHEAD (4) timeouts and the margin after it was
        # made (dispatcher.py): 4.2 s here, the wait before each restart's send.
        "DEPEG_DELIVERY__TIMEOUT_SECONDS": "1",
        "DEPEG_DELIVERY__LEASE_MARGIN_SECONDS": "0.2",
        "DEPEG_DELIVERY__POLL_INTERVAL_SECONDS": "0.05",
        "DEPEG_METRICS__PORT": "0",
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEPEG_")} | settings
    return subprocess.Popen([*cli_command(), "--log-format", "json", "deliver"], env=env,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)


async def test_a_crash_looping_worker_sends_at_most_max_attempts_times(
        broker: EmbeddedBroker, storage_url: str, tmp_path: Path) -> None:
    # Both backends: the PostgreSQL cycle (one statement) counts, gives up and writes the
    # interrupted history rows in SQL of its own.
    config = make_config(storage_url, broker.bootstrap_servers)
    never = asyncio.Event()
    log = tmp_path / "workers.log"
    async with api_client(config) as (client, db), receiver() as rec:
        async def hang(_request: web.Request, _body: bytes) -> None:
            await never.wait()

        rec.on_request = hang
        key, _ = await new_key(db)
        await subscribe(client, key, rec.url)
        # Recorded as the intake would; the Kafka side is covered by test_delivery.py.
        event = tier_change()
        subs = await WebhookStore(db).active_subscriptions()
        await DeliveryStore(db).record_events(
            [NewEvent(event.event_id, event.event_type, encode(event), subs)], time.time())

        async def status() -> str | None:
            value = await db.fetchval("SELECT status FROM webhook_deliveries")
            return None if value is None else str(value)

        kills = 0
        for _ in range(MAX_ATTEMPTS + 2):  # more restarts than attempts allowed
            sent_before = len(rec.received)
            proc = _worker(config, log)
            try:
                async def progressed(proc: subprocess.Popen[bytes] = proc,
                                     sent_before: int = sent_before) -> bool:
                    assert proc.poll() is None, log.read_text()[-2000:]
                    return (len(rec.received) > sent_before
                            or await status() == "max_retries_exceeded")

                await wait_until(progressed, 60, what="a send or the give-up")
                if len(rec.received) > sent_before:
                    proc.send_signal(signal.SIGKILL)  # mid-send: no outcome recorded
                    proc.wait(10)
                    kills += 1
                    continue
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(30) == 0, log.read_text()[-2000:]
                break
            finally:
                reap(proc)
        assert len(rec.received) == MAX_ATTEMPTS, "the receiver's own count of requests"
        assert kills == MAX_ATTEMPTS
        row = await db.fetchrow("SELECT id, status, attempts FROM webhook_deliveries")
        assert row is not None
        assert (row["status"], row["attempts"]) == ("max_retries_exceeded", MAX_ATTEMPTS)
        history = await db.fetch(
            "SELECT attempt, status_code, error FROM webhook_attempts WHERE delivery_id = $1"
            " ORDER BY attempt", row["id"])
        assert [h["attempt"] for h in history] == list(range(1, MAX_ATTEMPTS + 1))
        # Killed before an outcome: each reads as interrupted (or, on a very slow machine,
        # the 1 s timeout won the race with the kill).
        assert all(h["error"] == INTERRUPTED or "timeout" in (h["error"] or "")
                   for h in history), history
        assert "webhook.attempts_exhausted" in log.read_text()
