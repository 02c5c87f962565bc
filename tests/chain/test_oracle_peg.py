"""Oracle feeds, peg references and one poll of the chain poller, on real contracts."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest

from monitor import metrics
from monitor.config import ChainConfig, ChainsConfig
from producers import oracle, peg
from producers.chainsvc import ChainPoller, WatchedToken
from producers.rpc import RpcClient

from .evm import Chain, calldata
from .uniswap_setup import deploy_uniswap, make_pool

HEARTBEAT = 3600


def feed(chain: Chain, answer: float, decimals: int = 8) -> str:
    return chain.deploy("TestAggregator", ["uint8", "int256", "string"],
                        [decimals, round(answer * 10**decimals), "X / USD"])


def update(chain: Chain, address: str, answer: float, decimals: int = 8) -> None:
    chain.transact(chain.accounts[0], address, "updateAnswer(int256)",
                   round(answer * 10**decimals))


async def test_latest_round_backfill_and_staleness(chain: Chain) -> None:
    c = chain
    start = c.block_number()
    usdc_usd = feed(c, 1.0001)
    written = [0.9998, 0.97, 0.88]
    for value in written:
        update(c, usdc_usd, value)
    async with RpcClient("eth", [c.url]) as client:
        await client.pin_block()
        now = c.latest_timestamp()
        reading = await oracle.read_feed(client, usdc_usd, block_time=now,
                                         heartbeat_seconds=HEARTBEAT)
        assert reading.answer == Decimal("0.88") and reading.round_id == 4
        assert reading.stale is False and reading.price == "0.88"
        history = await oracle.backfill(client, usdc_usd, start, c.block_number(),
                                        chunk_blocks=2)
    assert [u.answer for u in history] == [Decimal(str(v)) for v in (1.0001, *written)]
    assert [u.round_id for u in history] == [1, 2, 3, 4]
    assert all(a.updated_at <= b.updated_at for a, b in itertools.pairwise(history))
    # The feed stops updating: past its heartbeat the reading says stale.
    c.increase_time(HEARTBEAT + 60)
    async with RpcClient("eth", [c.url]) as client:
        await client.pin_block()
        stale = await oracle.read_feed(client, usdc_usd, block_time=c.latest_timestamp(),
                                       heartbeat_seconds=HEARTBEAT)
    assert stale.stale is True and stale.age_seconds > HEARTBEAT


async def test_peg_references_from_feeds_and_vault_nav(chain: Chain) -> None:
    c = chain
    eur_usd, xau_usd = feed(c, 1.0842), feed(c, 2650.5)
    dai = c.deploy("TestToken", ["string", "string", "uint8"], ["Dai", "DAI", 18])
    impl = c.deploy("TestVault")
    init = calldata("initialize(address,string,string)", dai, "Savings Dai", "sDAI")
    vault = c.deploy("TransparentUpgradeableProxy", ["address", "address", "bytes"],
                     [impl, c.accounts[4], bytes.fromhex(init[2:])])
    user = c.accounts[3]
    c.transact(user, dai, "mint(address,uint256)", user, 10**24)
    c.transact(user, dai, "approve(address,uint256)", vault, 2**256 - 1)
    c.transact(user, vault, "deposit(uint256,address)", 10**23, user)
    c.transact(user, dai, "transfer(address,uint256)", vault, 10**22)  # yield: NAV 1.1
    async with RpcClient("eth", [c.url]) as client:
        await client.pin_block()
        now = c.latest_timestamp()
        eur = await oracle.read_feed(client, eur_usd, block_time=now, heartbeat_seconds=HEARTBEAT)
        xau = await oracle.read_feed(client, xau_usd, block_time=now, heartbeat_seconds=HEARTBEAT)
        nav = await peg.read_nav(client, vault)
    assert peg.peg_usd("usd") == 1
    assert peg.peg_usd("eur", peg_feed=eur) == Decimal("1.0842")
    assert peg.peg_usd("gold", peg_feed=xau) == Decimal("2650.5")
    assert peg.peg_usd("eur") is None  # no feed: unknown, not 1.0
    assert peg.peg_usd("nav", nav=nav) == pytest.approx(Decimal("1.1"), abs=Decimal("1e-12"))
    assert peg.peg_usd("nav") is None


async def test_one_poll_builds_the_tick_from_pool_oracle_and_quote_feed(chain: Chain) -> None:
    c = chain
    usdx = c.deploy("TestToken", ["string", "string", "uint8"], ["USD X", "USDX", 18])
    usdc = c.deploy("TestToken", ["string", "string", "uint8"], ["USD Coin", "USDC", 6])
    pool = make_pool(c, deploy_uniswap(c), usdx, 18, usdc, 6, fee=100, price_a_in_b=0.995)
    usdx_usd, usdc_usd = feed(c, 0.996), feed(c, 0.9999)
    token = WatchedToken("eth", usdx.lower(), "USDX", "usd", price_feed=usdx_usd.lower(),
                         pool=pool.pool.lower(), quote_feed=usdc_usd.lower())
    chains = ChainsConfig(oracle_heartbeat_seconds=HEARTBEAT)
    settings = ChainConfig(rpc_urls=[c.url], confirmations=0)
    poller = ChainPoller("eth", settings, chains, [token], [], RpcClient("eth", [c.url]))
    try:
        ticks, facts = await poller.poll()
        polled_at = c.latest_timestamp()
        # Then both feeds stop updating: past the heartbeat their answers are no observation.
        c.increase_time(HEARTBEAT + 60)
        [later], _ = await poller.poll()
    finally:
        await poller.client.close()
    [tick] = ticks
    assert facts == [] and tick.key == f"eth:{usdx.lower()}"
    assert tick.price == pytest.approx(0.995 * 0.9999, rel=1e-4)  # pool price x quote's USD
    assert tick.oracle_price == pytest.approx(0.996) and tick.peg == 1.0
    assert tick.slippage_bps is not None and 1 < tick.slippage_bps < 10_000
    assert tick.ts == polled_at  # the pinned block's time
    assert later.oracle_price is None and later.price is None  # no stale price published
    assert later.slippage_bps is not None  # the pool itself is still read
    assert metrics.ORACLE_STALE_FEEDS.labels("eth")._value.get() == 2
    ok, detail = poller.readiness()
    assert ok and "eth#0" in detail and "2 stale oracle feed(s)" in detail
