"""RPC endpoints that time out, fail or lag: the poller fails over, never crashes, and a chain
with no working endpoint shows as stale (readiness, metrics)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from monitor import metrics
from monitor.config import ChainConfig, ChainsConfig, Config, KafkaConfig
from monitor.kafka.embedded import EmbeddedBroker
from producers.chainsvc import ChainPoller, Publisher, WatchedToken, run_pollers
from producers.rpc import NoEndpointAvailable, RpcClient, RpcSettings

from .evm import Chain
from .rpc_proxy import MisbehavingProxy

SETTINGS = RpcSettings(timeout_seconds=1.0, retries=1, backoff_base_seconds=0.01,
                       max_lag_blocks=5)


def errors(endpoint: str, kind: str) -> float:
    value = metrics.RPC_ERRORS.labels("eth", endpoint, kind)._value.get()
    return float(value)


@pytest.fixture
async def proxies(chain: Chain) -> AsyncIterator[tuple[MisbehavingProxy, MisbehavingProxy]]:
    first, second = MisbehavingProxy(chain.url), MisbehavingProxy(chain.url)
    await first.start()
    await second.start()
    try:
        yield first, second
    finally:
        await first.stop()
        await second.stop()


def feed_token(chain: Chain) -> WatchedToken:
    usdx = chain.deploy("TestToken", ["string", "string", "uint8"], ["USD X", "USDX", 18])
    agg = chain.deploy("TestAggregator", ["uint8", "int256", "string"],
                       [8, 99_970_000, "USDX / USD"])
    return WatchedToken("eth", usdx.lower(), "USDX", "usd", price_feed=agg.lower())


def poller_for(urls: list[str], token: WatchedToken) -> ChainPoller:
    return ChainPoller("eth", ChainConfig(rpc_urls=urls, confirmations=0,
                                          poll_interval_seconds=1.0),
                       ChainsConfig(stale_after_polls=1.0), [token], [],
                       RpcClient("eth", urls, SETTINGS))


@pytest.mark.parametrize(("mode", "kind"), [("timeout", "timeout"), ("error", "http"),
                                            ("lag", "lagging")])
async def test_fails_over_to_the_second_url(
        chain: Chain, proxies: tuple[MisbehavingProxy, MisbehavingProxy], mode: str,
        kind: str) -> None:
    bad, good = proxies
    bad.mode = mode
    token = feed_token(chain)
    poller = poller_for([bad.url, good.url], token)
    before = errors("eth#0", kind)
    try:
        ticks, _ = await poller.poll()
    finally:
        await poller.client.close()
    [tick] = ticks
    assert tick.oracle_price == pytest.approx(0.9997)
    assert poller.client.block == chain.block_number()  # the real head, not a lagging one
    assert errors("eth#0", kind) == before + 1
    assert good.requests > 0 and poller.readiness()[0]


async def test_all_endpoints_down_no_crash_and_staleness_shows(
        chain: Chain, proxies: tuple[MisbehavingProxy, MisbehavingProxy],
        broker: EmbeddedBroker) -> None:
    bad, worse = proxies
    token = feed_token(chain)
    poller = poller_for([bad.url, worse.url], token)
    config = Config(kafka=KafkaConfig(bootstrap_servers=broker.bootstrap_servers))
    publisher = Publisher(config, broker.bootstrap_servers)
    await publisher.start()
    try:
        # A first good poll, then both endpoints fail.
        assert await run_pollers([poller], publisher, asyncio.Event(), once=True) == 0
        good_at = poller.last_success
        assert good_at is not None
        gauge = metrics.SOURCE_LAST_POLL.labels("eth:onchain")._value.get()
        assert gauge == good_at
        bad.mode, worse.mode = "error", "timeout"
        poller.client = RpcClient("eth", [bad.url, worse.url], SETTINGS)
        with pytest.raises(NoEndpointAvailable):
            await poller.poll()
        failed = metrics.SOURCE_POLL_FAILURES.labels("eth:onchain")._value.get()
        assert await run_pollers([poller], publisher, asyncio.Event(), once=True) == 1
        assert metrics.SOURCE_POLL_FAILURES.labels("eth:onchain")._value.get() == failed + 1
        assert poller.last_success == good_at  # staleness: the last success does not move
        assert metrics.SOURCE_LAST_POLL.labels("eth:onchain")._value.get() == good_at
        # Two failed polls each waited out a 1 s timeout: past the 1-interval staleness limit.
        ok, detail = poller.readiness()
        assert not ok and "last successful poll" in detail
        assert "no endpoint reports a head block" in detail
        assert "eth#0" in detail and "failures=" in detail
    finally:
        await publisher.close()
