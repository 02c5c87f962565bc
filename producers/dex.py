"""Uniswap v3 pools read over JSON-RPC -> the token's pool price and its 100k-sell slippage.

One poll reads, in two batched requests at the poll's pinned block: ``slot0`` (price and
tick), ``liquidity``, the fee tier, and the ``tickBitmap`` words around the current tick;
then ``ticks(t)`` of every initialized tick found there (its ``liquidityNet``). The sell is
simulated with the pool's own integer math (:mod:`producers.univ3math`) across those ticks,
fee included, so the result is what the pool would pay (tests/chain/test_dex.py executes the
swap on a real pool and compares). Why not the Quoter: see :mod:`producers.univ3math`.

Prices: the pool gives the token's price in the other pool token (the quote); its USD price
is that times the quote's own USD reference (a USD feed of the quote asset), never an
assumed 1.0 unless the configuration says the quote is the USD reference itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import univ3math
from .evmcalls import BadReply, call_data, decode_result
from .rpc import RpcClient
from .univ3math import PoolState

NOTIONAL_USD = 100_000.0
SLOT0 = call_data("slot0()")
LIQUIDITY = call_data("liquidity()")
FEE = call_data("fee()")
TICK_SPACING = call_data("tickSpacing()")
TOKEN0 = call_data("token0()")
TOKEN1 = call_data("token1()")
DECIMALS = call_data("decimals()")
_SLOT0_TYPES = ["uint160", "int24", "uint16", "uint16", "uint16", "uint8", "bool"]
_TICK_TYPES = ["uint128", "int128", "uint256", "uint256", "int56", "uint160", "uint32", "bool"]


@dataclass(frozen=True)
class PoolInfo:
    """What does not change for a pool: its tokens, their decimals, fee and spacing."""

    pool: str
    token0: str
    token1: str
    dec0: int
    dec1: int
    fee_pips: int
    spacing: int


@dataclass(frozen=True)
class PoolReading:
    info: PoolInfo
    state: PoolState

    def price_in_quote(self, token: str) -> float:
        """Human price of ``token`` in the other pool token, at the pool's mid price."""
        p0 = univ3math.spot_raw(self.state.sqrt_price_x96) * 10.0 ** (self.info.dec0 -
                                                                        self.info.dec1)
        return p0 if self.is_token0(token) else 1.0 / p0

    def is_token0(self, token: str) -> bool:
        token = token.lower()
        if token == self.info.token0:
            return True
        if token == self.info.token1:
            return False
        raise BadReply(f"{token} is not a token of pool {self.info.pool}")

    def sell_slippage_bps(self, token: str, price_usd: float,
                          notional_usd: float = NOTIONAL_USD) -> float:
        """Slippage in bp of selling ``notional_usd`` worth of ``token`` into the pool."""
        sell0 = self.is_token0(token)
        decimals = self.info.dec0 if sell0 else self.info.dec1
        amount_raw = int(notional_usd / price_usd * 10**decimals)
        return 1e4 * univ3math.sell_slippage(self.state, amount_raw, sell_token0=sell0)


async def read_info(client: RpcClient, pool: str) -> PoolInfo:
    fee, spacing, t0, t1 = await client.batch([client.eth_call(pool, d) for d in
                                               (FEE, TICK_SPACING, TOKEN0, TOKEN1)])
    token0 = decode_result(["address"], t0, f"{pool} token0")[0].lower()
    token1 = decode_result(["address"], t1, f"{pool} token1")[0].lower()
    d0, d1 = await client.batch([client.eth_call(token0, DECIMALS),
                                 client.eth_call(token1, DECIMALS)])
    return PoolInfo(pool.lower(), token0, token1,
                    decode_result(["uint8"], d0, f"{token0} decimals")[0],
                    decode_result(["uint8"], d1, f"{token1} decimals")[0],
                    decode_result(["uint24"], fee, f"{pool} fee")[0],
                    decode_result(["int24"], spacing, f"{pool} tickSpacing")[0])


async def read_pool(client: RpcClient, info: PoolInfo, *, span_ticks: int = 4000) -> PoolReading:
    """The pool's state at the pinned block, with every initialized tick within at least
    ``span_ticks`` of the current one (4000 ticks: a price move of about 50 %; a sell that
    moves the price further is priced as if liquidity ended there, i.e. over-stated)."""
    bitmap_words = max(1, -(-span_ticks // (256 * info.spacing)))
    slot0_raw, liquidity_raw = await client.batch([client.eth_call(info.pool, SLOT0),
                                                   client.eth_call(info.pool, LIQUIDITY)])
    slot0 = decode_result(_SLOT0_TYPES, slot0_raw, f"{info.pool} slot0")
    sqrt_price, tick = int(slot0[0]), int(slot0[1])
    (liquidity,) = decode_result(["uint128"], liquidity_raw, f"{info.pool} liquidity")
    compressed = tick // info.spacing
    word = compressed >> 8
    words = list(range(max(word - bitmap_words, -(2**15)), min(word + bitmap_words, 2**15 - 1) + 1))
    bitmaps = await client.batch([client.eth_call(info.pool, call_data("tickBitmap(int16)", w))
                                  for w in words])
    initialized: list[int] = []
    for w, raw in zip(words, bitmaps, strict=True):
        (bits,) = decode_result(["uint256"], raw, f"{info.pool} tickBitmap({w})")
        while bits:
            low = bits & -bits
            initialized.append(((w << 8) + low.bit_length() - 1) * info.spacing)
            bits ^= low
    replies = await client.batch([client.eth_call(info.pool, call_data("ticks(int24)", t))
                                  for t in initialized]) if initialized else []
    nets = {t: int(decode_result(_TICK_TYPES, r, f"{info.pool} ticks({t})")[1])
            for t, r in zip(initialized, replies, strict=True)}
    window = ((words[0] << 8) * info.spacing, (((words[-1] + 1) << 8) - 1) * info.spacing)
    window = (max(window[0], univ3math.MIN_TICK), min(window[1], univ3math.MAX_TICK))
    state = PoolState(sqrt_price, tick, int(liquidity), info.fee_pips, nets, window)
    return PoolReading(info, state)
