"""The delivery worker end to end: real broker, real database (both), real receivers."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest

from monitor.config import Config
from monitor.kafka.embedded import EmbeddedBroker
from monitor.logs import configure_logging
from monitor.storage import Database
from monitor.storage.webhooks import WebhookStore
from monitor.webhooks.apikeys import hash_api_key
from monitor.webhooks.signing import verify
from tests.process_support import reap
from tests.webhook_support import (
    ENCRYPTION_KEY,
    api_client,
    cli_command,
    create_topic,
    make_config,
    new_key,
    produce,
    receiver,
    running_worker,
    subscribe,
    tier_change,
    wait_until,
)

pytestmark = pytest.mark.broker


@dataclass
class Env:
    config: Config
    client: Any
    db: Database
    key: str
    key_id: str
    topic: str
    bootstrap: str
    e14_calls: int = 0  # GET /webhooks/deliveries made by this test (1 CU each)

    async def deliveries(self) -> list[dict[str, Any]]:
        self.e14_calls += 1
        resp = await self.client.get("/webhooks/deliveries?pageSize=500",
                                     headers={"x-api-key": self.key})
        data: dict[str, Any] = await resp.json()
        return list(data["deliveries"])

    async def wait_statuses(self, expected: list[str], within: float = 30.0
                            ) -> list[dict[str, Any]]:
        async def done() -> bool:
            return sorted(d["status"] for d in await self.deliveries()) == sorted(expected)

        await wait_until(done, within, what=f"delivery statuses {expected}")
        return await self.deliveries()


@asynccontextmanager
async def delivery_env(broker: EmbeddedBroker, storage_url: str,
                       clock: Callable[[], float] | None = None,
                       **delivery: Any) -> AsyncIterator[Env]:
    topic = "depeg.tier-changes"
    await create_topic(broker.bootstrap_servers, topic)
    config = make_config(storage_url, broker.bootstrap_servers, topic, **delivery)
    async with api_client(config, clock=clock) as (client, db):
        key, key_id = await new_key(db)
        yield Env(config, client, db, key, key_id, topic, broker.bootstrap_servers)


def event_bytes_of(body: bytes) -> bytes:
    """Independent of ``verify``: the delivery body is ``{"event":<bytes>,"signature":…}``."""
    assert body.startswith(b'{"event":')
    end = body.rindex(b',"signature":"')
    return body[len(b'{"event":'):end]


async def test_tier_change_reaches_matching_receivers_signed(broker: EmbeddedBroker,
                                                            storage_url: str) -> None:
    async with delivery_env(broker, storage_url) as env, receiver() as rec, \
            receiver() as other:
        sub = await subscribe(env.client, env.key, rec.url,
                              {"tiers": ["warning"], "chains": ["eth"],
                               "tokens": ["0xDAC17F958D2EE523A2206206994597C13D831EC7"],
                               "minDeviationPct": 2.0})
        await subscribe(env.client, env.key, other.url, {"chains": ["arb"]})
        matching = tier_change(new_tier="warning", deviation_pct=-2.5, symbol="USD₮")
        too_small = tier_change(new_tier="warning", deviation_pct=1.9)
        wrong_tier = tier_change(new_tier="critical", deviation_pct=-9)
        async with running_worker(env.config):
            # A bad record is logged and skipped; it does not stop the worker.
            await produce(env.bootstrap, env.topic,
                          [b"not json", b'{"event_type":"X"}', matching, too_small, wrong_tier])
            await rec.wait_requests(1)
            await env.wait_statuses(["success"])
            # A replay of the same event id creates no second delivery.
            await produce(env.bootstrap, env.topic, [matching])
            marker = tier_change(new_tier="warning", deviation_pct=-3)
            await produce(env.bootstrap, env.topic, [marker])
            await env.wait_statuses(["success", "success"])
        (first, second) = rec.received
        assert other.received == []
        got = first
        assert got.headers["X-Event-Type"] == "DEPEG_TIER_CHANGE"
        assert got.headers["X-Event-ID"] == matching.event_id
        assert "X-Webhook-Previous-Signature" not in got.headers
        assert verify(got.body, got.headers, sub["secret_key"])
        raw = event_bytes_of(got.body)
        expected = hmac.new(sub["secret_key"].encode(), raw, hashlib.sha256).hexdigest()
        assert got.headers["X-Webhook-Signature"] == expected
        body = msgspec.json.decode(got.body)
        assert body["signature"] == expected and body["delivered_at"].endswith("Z")
        assert body["event"]["data"]["symbol"] == "USD₮" and "₮".encode() in raw
        assert second.headers["X-Event-ID"] == marker.event_id
        assert await WebhookStore(env.db).units_used(env.key_id, "delivery") == 2


async def test_retries_until_success_or_max_attempts(broker: EmbeddedBroker,
                                                    storage_url: str) -> None:
    async with delivery_env(broker, storage_url) as env, receiver([500, 500, 200]) as flaky, \
            receiver([500]) as dead:
        await subscribe(env.client, env.key, flaky.url)
        await subscribe(env.client, env.key, dead.url)
        async with running_worker(env.config):
            await produce(env.bootstrap, env.topic, [tier_change()])
            deliveries = await env.wait_statuses(["success", "max_retries_exceeded"])
        assert flaky.answered == [500, 500, 200]
        assert dead.answered == [500] * 5
        by_status = {d["status"]: d for d in deliveries}
        ok, failed = by_status["success"], by_status["max_retries_exceeded"]
        assert [a["status_code"] for a in ok["attempt_history"]] == [500, 500, 200]
        assert ok["attempts"] == 3 and ok["completed_at"]
        assert [a["status_code"] for a in failed["attempt_history"]] == [500] * 5
        assert all(a["error"] == "HTTP 500" and a["latency_ms"] >= 0
                   for a in failed["attempt_history"])
        assert failed["next_attempt_at"] is None
        # Billing as the customer sees it: 2 subscriptions (E10), every E14 poll, and one
        # CU per delivery however many attempts (3 and 5 here).
        usage = await (await env.client.get("/usage?groupBy=endpoint",
                                            headers={"x-api-key": env.key})).json()
        assert {i["endpoint"]: i["cu"] for i in usage["items"]} == {
            "E10": 2, "E14": env.e14_calls, "delivery": 2}
        # backoff grows: the gaps between attempts are not all equal to the first
        gaps = [b.at - a.at for a, b in zip(dead.received, dead.received[1:], strict=False)]
        assert gaps[2] + gaps[3] > gaps[0] + gaps[1]


async def test_two_workers_in_one_group_deliver_each_event_once(broker: EmbeddedBroker,
                                                                storage_url: str) -> None:
    """Scale-out: workers share the group and the database; claims keep sends unique."""
    async with delivery_env(broker, storage_url) as env, receiver([200]) as rec:
        await subscribe(env.client, env.key, rec.url)
        events = [tier_change() for _ in range(20)]
        async with running_worker(env.config), running_worker(env.config):
            await produce(env.bootstrap, env.topic, events)
            await env.wait_statuses(["success"] * 20, within=60)
        ids = [r.headers["X-Event-ID"] for r in rec.received]
        assert sorted(ids) == sorted(e.event_id for e in events)


async def test_broker_outage_does_not_stop_retries_or_the_worker(broker: EmbeddedBroker,
                                                                 tmp_path: Any) -> None:
    """Retries come from the database, so they go on while the broker is frozen; after it
    resumes, new events flow again."""
    async with delivery_env(broker, f"sqlite:///{tmp_path / 'o.db'}",
                            backoff_base_seconds=1.0, backoff_max_seconds=1.0) as env, \
            receiver([500, 200]) as rec:
        await subscribe(env.client, env.key, rec.url)
        async with running_worker(env.config) as worker:
            await produce(env.bootstrap, env.topic, [tier_change()])
            await rec.wait_requests(1)
            broker.pause()
            try:
                await env.wait_statuses(["success"], within=20)
            finally:
                broker.resume()
            later = tier_change()
            await produce(env.bootstrap, env.topic, [later])
            await env.wait_statuses(["success", "success"], within=60)
            assert not worker.done()
        assert rec.received[-1].headers["X-Event-ID"] == later.event_id


async def test_hanging_receiver_is_cut_by_timeout_and_does_not_delay_others(
        broker: EmbeddedBroker, storage_url: str) -> None:
    async with delivery_env(broker, storage_url, timeout_seconds=1.0) as env, \
            receiver(["hang", 200]) as slow, receiver([200]) as healthy:
        await subscribe(env.client, env.key, slow.url)
        await subscribe(env.client, env.key, healthy.url)
        async with running_worker(env.config):
            await produce(env.bootstrap, env.topic, [tier_change()])
            await slow.wait_requests(1)
            await healthy.wait_requests(1)
            # the healthy receiver got its delivery while the other one was still hanging
            assert healthy.received[0].at - slow.received[0].at < 0.9
            deliveries = await env.wait_statuses(["success", "success"])
        slow_delivery = next(d for d in deliveries if len(d["attempt_history"]) == 2)
        timeout_attempt = slow_delivery["attempt_history"][0]
        assert timeout_attempt["status_code"] is None
        assert "timeout" in timeout_attempt["error"]
        assert 900 <= timeout_attempt["latency_ms"] < 5000


async def test_rotation_sends_previous_signature_for_24_hours(broker: EmbeddedBroker,
                                                             storage_url: str) -> None:
    now = [1_700_000_000.0]

    def clock() -> float:
        return now[0]

    async with delivery_env(broker, storage_url, clock=clock) as env, receiver() as rec:
        sub = await subscribe(env.client, env.key, rec.url)
        old_secret = sub["secret_key"]
        resp = await env.client.post(f"/webhooks/subscriptions/{sub['id']}/rotate-secret",
                                     headers={"x-api-key": env.key})
        new_secret = (await resp.json())["secret_key"]
        async with running_worker(env.config, clock=clock):
            now[0] += 23 * 3600 + 59 * 60  # 23:59 after the rotation
            await produce(env.bootstrap, env.topic, [tier_change()])
            await rec.wait_requests(1)
            now[0] += 2 * 60                # 24:01 after the rotation
            await produce(env.bootstrap, env.topic, [tier_change()])
            await rec.wait_requests(2)
        during, after = rec.received
        raw = event_bytes_of(during.body)
        assert during.headers["X-Webhook-Signature"] == hmac.new(
            new_secret.encode(), raw, hashlib.sha256).hexdigest()
        assert during.headers["X-Webhook-Previous-Signature"] == hmac.new(
            old_secret.encode(), raw, hashlib.sha256).hexdigest()
        assert verify(during.body, during.headers, old_secret)
        assert verify(during.body, during.headers, new_secret)
        assert "X-Webhook-Previous-Signature" not in after.headers
        assert verify(after.body, after.headers, new_secret)
        with pytest.raises(ValueError):
            verify(after.body, after.headers, old_secret)


def _worker(env: Env, log_path: Any) -> subprocess.Popen[bytes]:
    variables = {
        "DEPEG_STORAGE__URL": env.config.storage.url,
        "DEPEG_KAFKA__BOOTSTRAP_SERVERS": env.bootstrap,
        "DEPEG_KAFKA__TIER_CHANGES_TOPIC": env.topic,
        "DEPEG_KAFKA__DELIVERY_GROUP": env.config.kafka.delivery_group,
        "DEPEG_KAFKA__BATCH_TIMEOUT_MS": "50",
        "DEPEG_DELIVERY__ALLOW_LOOPBACK": "true",
        "DEPEG_DELIVERY__SECRET_ENCRYPTION_KEY": ENCRYPTION_KEY,
        "DEPEG_DELIVERY__MAX_ATTEMPTS": "50",
        "DEPEG_DELIVERY__BACKOFF_BASE_SECONDS": "0.2",
        "DEPEG_DELIVERY__BACKOFF_MAX_SECONDS": "0.4",
        "DEPEG_DELIVERY__TIMEOUT_SECONDS": "2",
        "DEPEG_DELIVERY__POLL_INTERVAL_SECONDS": "0.05",
        "DEPEG_METRICS__PORT": "0",  # the ops listener on any free port
    }
    env_vars = {k: v for k, v in os.environ.items() if not k.startswith("DEPEG_")}
    env_vars.update(variables)
    return subprocess.Popen([*cli_command(), "--log-format", "json", "deliver"], env=env_vars,
                            stdout=log_path.open("ab"), stderr=subprocess.STDOUT)


async def test_pending_retries_survive_kill_9(broker: EmbeddedBroker, storage_url: str,
                                             tmp_path: Any) -> None:
    async with delivery_env(broker, storage_url) as env, receiver([500]) as rec:
        await subscribe(env.client, env.key, rec.url)
        events = [tier_change() for _ in range(3)]
        await produce(env.bootstrap, env.topic, events)
        log_path = tmp_path / "worker.log"
        proc = _worker(env, log_path)
        try:
            async def all_failed_once() -> bool:
                found = await env.deliveries()
                return len(found) == 3 and all(d["status"] == "failed" for d in found)

            await wait_until(all_failed_once, 60, what="three failed deliveries")
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            assert proc.returncode == -signal.SIGKILL
            before = {d["id"]: d["attempts"] for d in await env.deliveries()}
            rec.script = [200]
            proc = _worker(env, log_path)
            await env.wait_statuses(["success"] * 3, within=90)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, log_path.read_text()[-3000:]
        finally:
            reap(proc)
        deliveries = await env.deliveries()
        for d in deliveries:
            statuses = [a["status_code"] for a in d["attempt_history"]]
            assert statuses.count(200) == 1 and statuses[-1] == 200
            assert d["attempts"] > before[d["id"]]
        assert rec.answered.count(200) == 3
        delivered = sorted(r.headers["X-Event-ID"] for r, code in
                           zip(rec.received, rec.answered, strict=True) if code == 200)
        assert delivered == sorted(e.event_id for e in events)


async def test_secrets_and_api_key_never_logged(broker: EmbeddedBroker, storage_url: str,
                                               capfd: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging(level="debug", fmt="json")
    try:
        async with delivery_env(broker, storage_url) as env, receiver([500, 200]) as rec:
            sub = await subscribe(env.client, env.key, rec.url)
            rotated = await env.client.post(f"/webhooks/subscriptions/{sub['id']}/rotate-secret",
                                            headers={"x-api-key": env.key})
            new_secret = (await rotated.json())["secret_key"]
            async with running_worker(env.config):
                await produce(env.bootstrap, env.topic, [tier_change()])
                await env.wait_statuses(["success"])
            await env.client.post(f"/webhooks/subscriptions/{sub['id']}/test",
                                  headers={"x-api-key": env.key})
            bad = await env.client.get("/webhooks/deliveries", headers={"x-api-key": "dpm_x"})
            assert bad.status == 401
            sealed = await env.db.fetch(
                "SELECT secret_sealed, previous_secret_sealed FROM webhook_subscriptions")
        out, err = capfd.readouterr()
        logs = out + err
        assert "webhook.attempt" in logs and "webhook.secret_rotated" in logs
        if env.config.storage.url.startswith("sqlite"):
            # Debug level really logged the SQL calls, statements kept, values not.
            assert "key_hash = ?1" in logs and "parameter redacted>" in logs
        signatures = [r.headers["X-Webhook-Signature"] for r in rec.received]
        forbidden = {
            "API key": env.key, "API key hash": hash_api_key(env.key),
            "bad key": "dpm_x", "encryption key": ENCRYPTION_KEY,
            "secret": sub["secret_key"], "rotated secret": new_secret,
            **{f"sealed {i}": v for i, row in enumerate(sealed) for v in row.values() if v},
            **{f"signature {i}": s for i, s in enumerate(signatures)},
        }
        for what, value in forbidden.items():
            lines = [line for line in logs.splitlines() if value in line]
            assert not lines, f"{what} logged: {lines[:2]}"
        assert len(rec.received) == 3
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
