"""On-chain sources end to end: a local chain's pool and oracle move, the adapters publish
ticks, the monitor's tier goes ok -> critical -> ok, and the webhook receiver sees it.

Everything is real: ganache with the published Uniswap v3 contracts and a Chainlink-interface
feed, the chain poller and its Kafka publisher, a Tansu broker, the monitor daemon, the
delivery worker, the HTTP API that takes the subscription, and a loopback receiver.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from monitor.config import ChainConfig, ChainsConfig
from monitor.daemon import MonitorDaemon
from monitor.kafka.embedded import EmbeddedBroker
from producers.chainsvc import ChainPoller, Publisher, WatchedToken
from producers.rpc import RpcClient
from tests.kafka.kafkatools import fast_kafka, wait_for
from tests.webhook_support import (
    Receiver,
    api_client,
    make_config,
    new_key,
    receiver,
    running_worker,
    subscribe,
)

from .evm import Chain, Ganache
from .uniswap_setup import deploy_uniswap, make_pool

pytestmark = [pytest.mark.broker]

#: Seconds of chain time between polls. Below the monitor's future tolerance (300 s past the
#: token's newest tick), which a live chain never comes near; the test fast-forwards the chain.
STEP = 240


def set_feed(chain: Chain, feed: str, answer: float) -> None:
    chain.transact(chain.accounts[0], feed, "updateAnswer(int256)", round(answer * 10**8))


@pytest.fixture
def fresh_chain(evm_artifacts: dict[str, dict[str, Any]], tmp_path: Path) -> Iterator[Chain]:
    """A node of its own: the session's node has been moved days ahead by other tests, and
    the monitor refuses ticks dated past its future tolerance of the wall clock."""
    node = Ganache(tmp_path / "ganache.log")
    node.start()
    try:
        yield Chain(node.url, evm_artifacts)
    finally:
        node.stop()


async def test_pool_and_oracle_moves_reach_the_webhook(fresh_chain: Chain, broker: EmbeddedBroker,
                                                       tmp_path: Path) -> None:
    c = fresh_chain
    usdx = c.deploy("TestToken", ["string", "string", "uint8"], ["USD X", "USDX", 18])
    usdc = c.deploy("TestToken", ["string", "string", "uint8"], ["USD Coin", "USDC", 6])
    pool = make_pool(c, deploy_uniswap(c), usdx, 18, usdc, 6, fee=100, price_a_in_b=1.0)
    usdx_feed = c.deploy("TestAggregator", ["uint8", "int256", "string"],
                         [8, 10**8, "USDX / USD"])
    usdc_feed = c.deploy("TestAggregator", ["uint8", "int256", "string"],
                         [8, 10**8, "USDC / USD"])
    token = WatchedToken("eth", usdx.lower(), "USDX", "usd", price_feed=usdx_feed.lower(),
                         pool=pool.pool.lower(), quote_feed=usdc_feed.lower())

    base = make_config(f"sqlite:///{tmp_path / 'store.db'}", broker.bootstrap_servers)
    config = msgspec.structs.replace(
        base,
        kafka=fast_kafka(broker.bootstrap_servers, delivery_group=f"d-{uuid.uuid4().hex[:8]}",
                         monitor_group=f"m-{uuid.uuid4().hex[:8]}"),
        chains=ChainsConfig(oracle_heartbeat_seconds=86_400))
    poller = ChainPoller("eth", ChainConfig(rpc_urls=[c.url], confirmations=0),
                         config.chains, [token], [], RpcClient("eth", [c.url]))
    publisher = Publisher(config, broker.bootstrap_servers)
    await publisher.start()
    stop = asyncio.Event()
    daemon = MonitorDaemon(config)
    monitor = asyncio.create_task(daemon.run(stop))
    trader = c.accounts[3]

    def usdx_price0(price_usdx: float) -> float:
        """The pool's token0 price that puts USDX at ``price_usdx`` USDC."""
        return price_usdx if pool.token0 == usdx else 1.0 / price_usdx

    async def poll_until(done: Callable[[], object], what: str, max_polls: int) -> None:
        for _ in range(max_polls):
            ticks, _ = await poller.poll()
            await publisher.publish(ticks, [])
            c.increase_time(STEP)
            if done():
                return
        await wait_for(_async(done), 60, what)

    try:
        async with api_client(config) as (client, db), receiver() as rec:
            key, _ = await new_key(db)
            await subscribe(client, key, rec.url)
            async with running_worker(config):
                def tiers() -> list[str]:
                    return [e["data"]["new_tier"] for e in events(rec)]

                # Calm: at peg for half an hour, no alert. The first tick is dated now.
                for _ in range(8):
                    ticks, _ = await poller.poll()
                    await publisher.publish(ticks, [])
                    c.increase_time(STEP)
                [calm] = ticks
                assert calm.price == pytest.approx(1.0, abs=1e-3) and calm.oracle_price == 1.0
                # Depeg: the pool is sold down to 0.78, past its liquidity (a 100k sell now
                # gets next to nothing), while the oracle lags at 0.90.
                pool.swap_to_price(trader, usdx, usdx_price0(0.78))
                set_feed(c, usdx_feed, 0.90)
                await poll_until(lambda: "critical" in tiers(), "critical webhook", 30)
                ticks, _ = await poller.poll()
                assert ticks[0].price == pytest.approx(0.78, rel=2e-3)
                assert ticks[0].oracle_price == 0.9 and (ticks[0].slippage_bps or 0) > 5000
                # Recovery: bought back to peg; the tier steps down after the dwell time.
                pool.swap_to_price(trader, usdc, usdx_price0(1.0))
                set_feed(c, usdx_feed, 1.0)
                await poll_until(lambda: tiers() and tiers()[-1] == "ok", "ok webhook", 90)
        got = events(rec)
        assert got[0]["data"]["old_tier"] == "ok"
        assert "critical" in [e["data"]["new_tier"] for e in got]
        assert got[-1]["data"]["new_tier"] == "ok"
        assert all(e["data"]["token_address"] == usdx.lower() for e in got)
        assert all(r.headers.get("X-Webhook-Signature") for r in rec.received)
        assert daemon.stats.dead_letters == 0  # every tick the adapters published was accepted
    finally:
        stop.set()
        await asyncio.wait_for(monitor, 30)
        await publisher.close()
        await poller.client.close()


def events(rec: Receiver) -> list[dict[str, Any]]:
    """Tier-change deliveries (the subscription's verification request, if any, aside)."""
    out: list[dict[str, Any]] = []
    for r in rec.received:
        body = json.loads(r.body) if r.body else {}
        event = body.get("event", {})
        if event.get("event_type") == "DEPEG_TIER_CHANGE":
            out.append(event)
    return out


def _async(pred: Callable[[], object]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return bool(pred())
    return check
