"""Deploys a real Uniswap v3 pool (published v3-core/v3-periphery artifacts) with liquidity
spread over several initialized ranges, so a 100k sell crosses ticks."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .evm import Q96, Chain

MAX_UINT = (1 << 256) - 1
DEADLINE = 2**40
SPACING = {100: 1, 500: 10, 3000: 60, 10000: 200}
EXACT_INPUT_SINGLE = ("exactInputSingle((address,address,uint24,address,uint256,uint256,uint256,"
                      "uint160))")


@dataclass
class Pool:
    chain: Chain
    factory: str
    manager: str
    router: str
    pool: str
    token0: str
    token1: str
    dec0: int
    dec1: int
    fee: int
    lp: str

    def swap_exact_input(self, sender: str, token_in: str, amount_in: int) -> int:
        """Execute the swap on chain; return what the pool actually paid (balance change)."""
        c = self.chain
        token_out = self.token1 if token_in == self.token0 else self.token0
        c.transact(sender, token_in, "mint(address,uint256)", sender, amount_in)
        c.transact(sender, token_in, "approve(address,uint256)", self.router, MAX_UINT)
        before = c.call(token_out, "balanceOf(address)", ["uint256"], sender)[0]
        c.transact(sender, self.router, EXACT_INPUT_SINGLE,
                   (token_in, token_out, self.fee, sender, DEADLINE, amount_in, 0, 0))
        after = c.call(token_out, "balanceOf(address)", ["uint256"], sender)[0]
        return int(after - before)

    def swap_to_price(self, sender: str, token_in: str, price0: float) -> None:
        """Sell ``token_in`` until the pool's token0 price (in token1, human units) reaches
        ``price0``: the router stops at the sqrt price limit, so this moves the price."""
        c = self.chain
        token_out = self.token1 if token_in == self.token0 else self.token0
        amount = 10**9 * 10 ** (self.dec0 if token_in == self.token0 else self.dec1)
        c.transact(sender, token_in, "mint(address,uint256)", sender, amount)
        c.transact(sender, token_in, "approve(address,uint256)", self.router, MAX_UINT)
        limit = sqrt_price_x96(price0, self.dec0, self.dec1)
        c.transact(sender, self.router, EXACT_INPUT_SINGLE,
                   (token_in, token_out, self.fee, sender, DEADLINE, amount, 0, limit))

    def slot0_tick(self) -> int:
        return int(self.chain.call(self.pool, "slot0()", ["uint160", "int24", "uint16", "uint16",
                                                          "uint16", "uint8", "bool"])[1])


def sqrt_price_x96(human_price_token0_in_token1: float, dec0: int, dec1: int) -> int:
    raw = human_price_token0_in_token1 * 10 ** (dec1 - dec0)
    return int(math.sqrt(raw) * Q96)


def deploy_uniswap(chain: Chain) -> tuple[str, str, str]:
    owner = chain.accounts[0]
    factory = chain.deploy("UniswapV3Factory", sender=owner)
    # The 0.01 % tier (tick spacing 1) of stablecoin pools, enabled by governance as on mainnet.
    chain.transact(owner, factory, "enableFeeAmount(uint24,int24)", 100, 1)
    # WETH9 and the token descriptor are never used by these tests (no ETH, no NFT metadata).
    manager = chain.deploy("NonfungiblePositionManager", ["address", "address", "address"],
                           [factory, owner, owner])
    router = chain.deploy("SwapRouter", ["address", "address"], [factory, owner])
    return factory, manager, router


def make_pool(chain: Chain, uniswap: tuple[str, str, str], token_a: str, dec_a: int,
              token_b: str, dec_b: int, *, fee: int = 500, price_a_in_b: float = 1.0,
              ranges: tuple[tuple[int, int, int], ...] = ((-20, 20, 2_000_000),
                                                            (-200, 200, 3_000_000),
                                                            (-2000, 2000, 5_000_000)),
              ) -> Pool:
    """A pool of a/b at ``price_a_in_b``; ``ranges`` are (lower, upper) tick offsets from the
    start tick and a USD-ish size of each position (in whole tokens of each side)."""
    factory, manager, router = uniswap
    lp = chain.accounts[1]
    if int(token_a, 16) < int(token_b, 16):
        t0, d0, t1, d1, price0 = token_a, dec_a, token_b, dec_b, price_a_in_b
    else:
        t0, d0, t1, d1, price0 = token_b, dec_b, token_a, dec_a, 1.0 / price_a_in_b
    sqrt_p = sqrt_price_x96(price0, d0, d1)
    chain.transact(lp, manager,
                   "createAndInitializePoolIfNecessary(address,address,uint24,uint160)",
                   t0, t1, fee, sqrt_p)
    pool = chain.call(factory, "getPool(address,address,uint24)", ["address"], t0, t1, fee)[0]
    spacing = SPACING[fee]
    start_tick = math.floor(math.log(price0 * 10 ** (d1 - d0)) / math.log(1.0001))
    for token, dec in ((t0, d0), (t1, d1)):
        chain.transact(lp, token, "mint(address,uint256)", lp, 10**15 * 10**dec)
        chain.transact(lp, token, "approve(address,uint256)", manager, MAX_UINT)
    for low, high, size in ranges:
        lower = (start_tick + low) // spacing * spacing
        upper = -((-(start_tick + high)) // spacing) * spacing
        chain.transact(lp, manager, "mint((address,address,uint24,int24,int24,uint256,uint256,"
                       "uint256,uint256,address,uint256))",
                       (t0, t1, fee, lower, upper, size * 10**d0, int(size * price0) * 10**d1,
                        0, 0, lp, DEADLINE))
    return Pool(chain, factory, manager, router, pool, t0, t1, d0, d1, fee, lp)
