"""The DEX adapter against a real Uniswap v3 pool on a local chain.

The independent truth is the pool itself: the test executes the 100k sell through the
published SwapRouter and compares what the pool paid with the adapter's slippage.
"""

from __future__ import annotations

import pytest

from producers.dex import read_info, read_pool
from producers.rpc import RpcClient

from .evm import Chain
from .uniswap_setup import deploy_uniswap, make_pool

# Thin liquidity near the price, more further out: a 100k sell must cross initialized ticks.
RANGES = ((-4, 4, 40_000), (-60, 60, 300_000), (-3000, 3000, 2_000_000))


def actual_slippage_bps(amount_in: int, amount_out: int, mid_out_per_in: float) -> float:
    return 1e4 * (1 - amount_out / (amount_in * mid_out_per_in))


@pytest.mark.parametrize("fee", [100, 500])
async def test_slippage_of_a_100k_sell_matches_the_executed_swap(chain: Chain, fee: int) -> None:
    c = chain
    usdx = c.deploy("TestToken", ["string", "string", "uint8"], ["USD X", "USDX", 18])
    usdc = c.deploy("TestToken", ["string", "string", "uint8"], ["USD Coin", "USDC", 6])
    pool = make_pool(c, deploy_uniswap(c), usdx, 18, usdc, 6, fee=fee, price_a_in_b=0.999,
                     ranges=RANGES)
    async with RpcClient("eth", [c.url]) as client:
        await client.pin_block()
        info = await read_info(client, pool.pool)
        reading = await read_pool(client, info)
        assert len(reading.state.ticks) == 6  # three positions, two ends each
        price = reading.price_in_quote(usdx)
        assert price == pytest.approx(0.999, rel=1e-4)
        # Quote = USDC at 1 USD here (the USD reference of the quote is tested elsewhere).
        bps = reading.sell_slippage_bps(usdx, price_usd=price)
        initialized = sorted(reading.state.ticks)
        back = reading.sell_slippage_bps(usdc, price_usd=1.0)
    amount_in = int(100_000 / price * 10**18)
    start_tick = pool.slot0_tick()
    out = pool.swap_exact_input(c.accounts[3], usdx, amount_in)
    real = actual_slippage_bps(amount_in, out, price * 10**6 / 10**18)
    low, high = sorted((start_tick, pool.slot0_tick()))
    assert any(low < t <= high for t in initialized)  # the sell crossed an initialized tick
    assert bps == pytest.approx(real, abs=1.0)  # the acceptance bound: 1 bp
    assert bps == pytest.approx(real, abs=0.01)  # in fact the same integer math
    assert bps > fee / 100  # fee plus real impact

    # The other direction on the moved pool: read again, sell the quote, compare.
    async with RpcClient("eth", [c.url]) as client:
        await client.pin_block()
        reading = await read_pool(client, info)
        mid = reading.price_in_quote(usdc)  # USDX per USDC
        bps_back = reading.sell_slippage_bps(usdc, price_usd=1.0)
    amount_back = 100_000 * 10**6
    out_back = pool.swap_exact_input(c.accounts[3], usdc, amount_back)
    assert bps_back == pytest.approx(actual_slippage_bps(amount_back, out_back,
                                                         mid * 10**18 / 10**6), abs=0.01)
    assert back > 0
