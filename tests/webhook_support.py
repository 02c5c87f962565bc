"""Test helpers for the webhook suites: real loopback receivers, config, Kafka, API clients."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from monitor.api.app import create_app
from monitor.api.webhooks import CLOCK
from monitor.config import Config, DeliveryConfig, KafkaConfig, StorageConfig
from monitor.records import EVENT_TYPE, TierChangeData, TierChangeEvent, encode, event_id
from monitor.storage import Database, connect
from monitor.storage.deliveries import DeliveryStore
from monitor.storage.webhooks import WebhookStore, migrate_webhooks
from monitor.webhooks.apikeys import new_api_key
from monitor.webhooks.dispatcher import Dispatcher
from monitor.webhooks.secrets import SecretBox

#: A fixed encryption key for subscription secrets in tests (32 bytes, base64).
ENCRYPTION_KEY = base64.urlsafe_b64encode(b"k" * 32).decode()
TOKEN = "0xdac17f958d2ee523a2206206994597c13d831ec7"


def free_tcp_port() -> int:
    """A loopback port nothing listens on (for connection-refused cases)."""
    from monitor.kafka.embedded import free_port

    return free_port()


def cli_command() -> list[str]:
    """How to start ``depeg-monitor`` as a child process in this environment."""
    import os
    import shutil
    import sys

    beside = os.path.join(os.path.dirname(sys.executable), "depeg-monitor")
    if os.path.exists(beside):
        return [beside]
    found = shutil.which("depeg-monitor")
    return [found] if found else [sys.executable, "-m", "monitor"]


def make_config(storage_url: str, bootstrap: str = "", topic: str = "depeg.tier-changes",
                **delivery: Any) -> Config:
    settings: dict[str, Any] = {
        "allow_loopback": True, "timeout_seconds": 2.0, "backoff_base_seconds": 0.05,
        "backoff_max_seconds": 0.2, "poll_interval_seconds": 0.05,
        "secret_encryption_key": ENCRYPTION_KEY,
    }
    settings.update(delivery)
    return Config(
        kafka=KafkaConfig(bootstrap_servers=bootstrap, tier_changes_topic=topic,
                          delivery_group=f"delivery-{uuid.uuid4().hex[:8]}",
                          batch_timeout_ms=50),
        storage=StorageConfig(url=storage_url),
        delivery=DeliveryConfig(**settings),
    )


def tier_change(new_tier: str = "warning", old_tier: str = "ok", chain: str = "eth",
                token: str = TOKEN, deviation_pct: float = -2.5, at: str | None = None,
                symbol: str = "USDT") -> TierChangeEvent:
    at = at or f"2024-01-01T00:{uuid.uuid4().int % 60:02d}:{uuid.uuid4().int % 60:02d}Z"
    return TierChangeEvent(
        event_type=EVENT_TYPE,
        event_id=event_id(chain, token, at + uuid.uuid4().hex, old_tier, new_tier),
        timestamp=at,
        data=TierChangeData(token_address=token, chain=chain, symbol=symbol,
                            old_tier=old_tier, new_tier=new_tier, risk_score=65.5,
                            deviation_pct=deviation_pct, price_usd="0.975", peg_usd="1"))


@dataclass
class Received:
    body: bytes
    headers: dict[str, str]
    at: float


@dataclass
class Receiver:
    """A real HTTP receiver on loopback. ``script`` gives the status per request (the
    last one repeats); ``"hang"`` never answers."""

    script: list[int | str] = field(default_factory=lambda: [200])
    received: list[Received] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)
    url: str = ""
    on_request: Callable[[web.Request, bytes], Awaitable[web.StreamResponse | None]] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.received.append(Received(body, dict(request.headers), time.monotonic()))
        self.changed.set()
        if self.on_request is not None:
            custom = await self.on_request(request, body)
            if custom is not None:
                return custom
        step = self.script[min(len(self.received) - 1, len(self.script) - 1)]
        if step == "hang":
            await asyncio.sleep(3600)
        status = int(step)
        self.answered.append(status)
        return web.Response(status=status, text="ok" if status < 300 else "nope")

    async def wait_requests(self, n: int, within: float = 15.0) -> None:
        async with asyncio.timeout(within):
            while len(self.received) < n:
                self.changed.clear()
                await self.changed.wait()


@asynccontextmanager
async def receiver(script: Sequence[int | str] | None = None, path: str = "/hook"
                   ) -> AsyncIterator[Receiver]:
    rec = Receiver(script=list(script or [200]))
    app = web.Application()
    app.router.add_route("*", path, rec.handle)
    app.router.add_route("*", "/{tail:.*}", rec.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    rec.url = f"http://127.0.0.1:{port}{path}"
    try:
        yield rec
    finally:
        await runner.cleanup()


async def wait_until(predicate: Callable[[], Awaitable[bool]], within: float = 15.0,
                     interval: float = 0.05, what: str = "condition") -> None:
    """Poll an eventual condition (a database state) until it holds or ``within`` passes."""
    deadline = time.monotonic() + within
    while True:
        if await predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(interval)


async def delivery_with_attempts(db: Database, sub_id: str, attempts: int = 1) -> str:
    """A delivery created as the worker creates it, then attempted ``attempts`` times
    (HTTP 500 each), the last leaving it ``max_retries_exceeded``."""
    from monitor.storage.deliveries import DeliveryStore, NewEvent

    subs = [s for s in await WebhookStore(db).active_subscriptions() if s.id == sub_id]
    event = tier_change()
    store = DeliveryStore(db)
    await store.record_events([NewEvent(event.event_id, event.event_type, encode(event), subs)],
                              time.time())
    (due,) = [d for d in await store.due(time.time() + 1, 100) if d.subscription_id == sub_id]
    for n in range(attempts):
        assert await store.claim(due.id, f"t{n}", time.time(), time.time() + 60,
                                 ("pending", "failed"))
        last = n == attempts - 1
        current = await store.load(due.id)
        assert current is not None
        await store.record_attempt(delivery=current, token=f"t{n}", manual=False,
                                   started_at=time.time(), status_code=500, latency_ms=1,
                                   error="HTTP 500",
                                   new_status="max_retries_exceeded" if last else "failed",
                                   next_attempt_at=None if last else time.time(),
                                   now=time.time())
    return due.id


async def attempt_history(db: Database) -> list[tuple[str, int, int | None, str | None]]:
    """Every delivery's attempt history as the API reads it (``DeliveryStore.attempts``:
    history rows, and a success the worker's cycle kept on its delivery's row), as
    (delivery id, attempt, status code, error), by delivery and attempt."""
    ids = [r["id"] for r in await db.fetch("SELECT id FROM webhook_deliveries")]
    found = await DeliveryStore(db).attempts(ids)
    return sorted((d, a["attempt"], a["status_code"], a["error"])
                  for d, rows in found.items() for a in rows)


async def queue_for_new_subscription(db: Database, box: SecretBox, url: str,
                                     count: int) -> list[TierChangeEvent]:
    """A subscription to ``url`` (with a sealed secret, as the API makes it) and ``count``
    tier changes recorded for it as the intake records them: deliveries due now."""
    from monitor.storage.deliveries import DeliveryStore, NewEvent
    from monitor.webhooks.filters import Filters
    from monitor.webhooks.urls import origin

    _, key_id = await new_key(db)
    sid = str(uuid.uuid4())
    await WebhookStore(db).create_subscription(
        sub_id=sid, api_key_id=key_id, webhook_url=url, endpoint=origin(url),
        event_types=["DEPEG_TIER_CHANGE"], filters=Filters(),
        secret_sealed=box.seal("s" * 32, sid), now=time.time())
    subs = await WebhookStore(db).active_subscriptions()
    events = [tier_change() for _ in range(count)]
    await DeliveryStore(db).record_events(
        [NewEvent(e.event_id, e.event_type, encode(e), subs) for e in events], time.time())
    return events


async def new_key(db: Database, name: str = "tester") -> tuple[str, str]:
    """(plain key, key id)."""
    await migrate_webhooks(db)
    key = new_api_key()
    record = await WebhookStore(db).create_api_key(name, key, time.time())
    return key, record.id


@asynccontextmanager
async def api_client(config: Config, clock: Callable[[], float] | None = None
                     ) -> AsyncIterator[tuple[TestClient[Any, Any], Database]]:
    """The real API app on a loopback port, plus its database."""
    db = await connect(config.storage.url)
    await migrate_webhooks(db)
    app = create_app(config, db)
    if clock is not None:
        app[CLOCK] = clock
    client: TestClient[Any, Any] = TestClient(TestServer(app, host="127.0.0.1"))
    await client.start_server()
    try:
        yield client, db
    finally:
        await client.close()
        await db.close()


async def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


async def produce(bootstrap: str, topic: str,
                  events: Sequence[TierChangeEvent | bytes]) -> None:
    """Produce events (or raw bytes, for bad records) keyed like the monitor does."""
    from monitor.testing import publish

    await publish(bootstrap, topic, [
        (b"eth:bad", e) if isinstance(e, bytes)
        else (f"{e.data.chain}:{e.data.token_address.lower()}".encode(), encode(e))
        for e in events])


@asynccontextmanager
async def running_worker(config: Config, clock: Callable[[], float] = time.time
                         ) -> AsyncIterator[asyncio.Task[None]]:
    from consumers.delivery import run_worker

    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(config, stop, clock=clock))
    try:
        yield task
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=20)


@asynccontextmanager
async def running_dispatcher(db: Database, config: DeliveryConfig, box: SecretBox
                             ) -> AsyncIterator[Dispatcher]:
    """A :class:`~monitor.webhooks.dispatcher.Dispatcher` running on ``db`` with a real
    sender, woken once as the intake wakes it after recording deliveries; stopped (its
    in-flight sends finished or timed out) and its sender closed on exit."""
    from monitor.storage.deliveries import DeliveryStore
    from monitor.webhooks.dispatcher import DeliveryAttempts
    from monitor.webhooks.sender import Sender

    sender = Sender(config)
    dispatcher = Dispatcher(DeliveryAttempts(DeliveryStore(db), sender, box, config))
    stop = asyncio.Event()
    dispatcher.wake.set()
    runner = asyncio.create_task(dispatcher.run(stop))
    try:
        yield dispatcher
    finally:
        stop.set()
        try:
            await runner  # the dispatcher logs its own errors: one raised here is a failure
        finally:
            await sender.close()


async def subscribe(client: TestClient[Any, Any], key: str, url: str,
                    filters: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"webhookUrl": url, "eventTypes": [EVENT_TYPE]}
    if filters is not None:
        body["filters"] = filters
    resp = await client.post("/webhooks/subscriptions", json=body, headers={"x-api-key": key})
    assert resp.status == 201, await resp.text()
    data: dict[str, Any] = await resp.json()
    return data
