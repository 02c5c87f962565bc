"""Uniswap v3 swap math, exact: a port of the pool's TickMath, SqrtPriceMath and SwapMath.

Both Uniswap producers use it: the file-based ``produce uniswap`` (pool state without tick
data: the current in-range liquidity only, no fee) and the live on-chain adapter (slot0,
liquidity, the fee tier and every initialized tick it reads through ``eth_call``). So the
slippage of a sell is computed the way the pool itself computes the swap, in integers with
the pool's rounding, crossing initialized ticks and applying their ``liquidityNet``.

Why simulate instead of calling the Quoter through ``eth_call``: the Quoter executes a real
swap and reverts to return the result, which costs ~100k-1M gas per quote and needs the
periphery deployed at a known address on every chain (it is not on every chain we watch);
reading the pool's state is a handful of cheap view calls that batch into one request, the
same reads serve the price, and the math here is checked against executed swaps on a real
pool in tests/chain/test_dex.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

Q96 = 1 << 96
Q128 = 1 << 128
MIN_TICK = -887272
MAX_TICK = 887272
MIN_SQRT_RATIO = 4295128739
MAX_SQRT_RATIO = 1461446703485210103287273052203988822378723970342
#: Fees are in hundredths of a basis point (500 = 0.05 %).
FEE_DENOMINATOR = 1_000_000

_TICK_FACTORS = (
    (0x2, 0xFFF97272373D413259A46990580E213A), (0x4, 0xFFF2E50F5F656932EF12357CF3C7FDCC),
    (0x8, 0xFFE5CACA7E10E4E61C3624EAA0941CD0), (0x10, 0xFFCB9843D60F6159C9DB58835C926644),
    (0x20, 0xFF973B41FA98C081472E6896DFB254C0), (0x40, 0xFF2EA16466C96A3843EC78B326B52861),
    (0x80, 0xFE5DEE046A99A2A811C461F1969C3053), (0x100, 0xFCBE86C7900A88AEDCFFC83B479AA3A4),
    (0x200, 0xF987A7253AC413176F2B074CF7815E54), (0x400, 0xF3392B0822B70005940C7A398E4B70F3),
    (0x800, 0xE7159475A2C29B7443B29C7FA6E889D9), (0x1000, 0xD097F3BDFD2022B8845AD8F792AA5825),
    (0x2000, 0xA9F746462D870FDF8A65DC1F90E061E5), (0x4000, 0x70D869A156D2A1B890BB3DF62BAF32F7),
    (0x8000, 0x31BE135F97D08FD981231505542FCFA6), (0x10000, 0x9AA508B5B7A84E1C677DE54F3E99BC9),
    (0x20000, 0x5D6AF8DEDB81196699C329225EE604), (0x40000, 0x2216E584F5FA1EA926041BEDFE98),
    (0x80000, 0x48A170391F7DC42444E8FA2),
)


def sqrt_ratio_at_tick(tick: int) -> int:
    """TickMath.getSqrtRatioAtTick: sqrt(1.0001**tick) as a Q64.96, bit for bit."""
    abs_tick = abs(tick)
    if abs_tick > MAX_TICK:
        raise ValueError(f"tick {tick} out of range")
    ratio = 0xFFFCB933BD6FAD37AA2D162D1A594001 if abs_tick & 1 else Q128
    for bit, factor in _TICK_FACTORS:
        if abs_tick & bit:
            ratio = (ratio * factor) >> 128
    if tick > 0:
        ratio = ((1 << 256) - 1) // ratio
    return (ratio >> 32) + (0 if ratio % (1 << 32) == 0 else 1)


def _div_up(a: int, b: int) -> int:
    return -(-a // b)


def _mul_div_up(a: int, b: int, d: int) -> int:
    return _div_up(a * b, d)


def amount0_delta(sqrt_a: int, sqrt_b: int, liquidity: int, round_up: bool) -> int:
    lo, hi = sorted((sqrt_a, sqrt_b))
    num1, num2 = liquidity << 96, hi - lo
    if round_up:
        return _div_up(_mul_div_up(num1, num2, hi), lo)
    return (num1 * num2 // hi) // lo


def amount1_delta(sqrt_a: int, sqrt_b: int, liquidity: int, round_up: bool) -> int:
    lo, hi = sorted((sqrt_a, sqrt_b))
    return _mul_div_up(liquidity, hi - lo, Q96) if round_up else liquidity * (hi - lo) // Q96


def _next_sqrt_from_input(sqrt_p: int, liquidity: int, amount_in: int, zero_for_one: bool) -> int:
    if zero_for_one:  # token0 in: price falls (getNextSqrtPriceFromAmount0RoundingUp, add)
        if amount_in == 0:
            return sqrt_p
        num1 = liquidity << 96
        return _mul_div_up(num1, sqrt_p, num1 + amount_in * sqrt_p)
    return sqrt_p + (amount_in << 96) // liquidity  # token1 in: price rises, round down


def swap_step(sqrt_p: int, sqrt_target: int, liquidity: int, amount_remaining: int,
              fee_pips: int) -> tuple[int, int, int, int]:
    """SwapMath.computeSwapStep for an exact-input step: (sqrt_next, in, out, fee)."""
    zero_for_one = sqrt_p >= sqrt_target
    remaining_less_fee = amount_remaining * (FEE_DENOMINATOR - fee_pips) // FEE_DENOMINATOR
    amount_in = (amount0_delta(sqrt_target, sqrt_p, liquidity, True) if zero_for_one
                 else amount1_delta(sqrt_p, sqrt_target, liquidity, True))
    if remaining_less_fee >= amount_in:
        sqrt_next = sqrt_target
    else:
        sqrt_next = _next_sqrt_from_input(sqrt_p, liquidity, remaining_less_fee, zero_for_one)
    reached = sqrt_next == sqrt_target
    if zero_for_one:
        if not reached:
            amount_in = amount0_delta(sqrt_next, sqrt_p, liquidity, True)
        amount_out = amount1_delta(sqrt_next, sqrt_p, liquidity, False)
    else:
        if not reached:
            amount_in = amount1_delta(sqrt_p, sqrt_next, liquidity, True)
        amount_out = amount0_delta(sqrt_p, sqrt_next, liquidity, False)
    if not reached:
        fee = amount_remaining - amount_in
    else:
        fee = _mul_div_up(amount_in, fee_pips, FEE_DENOMINATOR - fee_pips)
    return sqrt_next, amount_in, amount_out, fee


@dataclass(frozen=True)
class PoolState:
    """What a swap needs: price, in-range liquidity, fee, and liquidityNet per initialized tick.

    ``ticks`` holds the initialized ticks that were read (a window around the current tick);
    a swap that runs past the window's edge is priced as if no more liquidity followed, so it
    over-states the impact there rather than under-stating it.
    """

    sqrt_price_x96: int
    tick: int
    liquidity: int
    fee_pips: int = 0
    ticks: Mapping[int, int] = field(default_factory=dict)
    #: The lowest and highest tick the ``ticks`` window covers (None: no tick data at all).
    window: tuple[int, int] | None = None


@dataclass(frozen=True)
class SwapResult:
    amount_in: int  # consumed, fee included
    amount_out: int
    sqrt_price_x96: int  # after the swap
    filled: bool  # False when liquidity ran out before the whole amount was sold


def simulate_exact_input(state: PoolState, amount_in: int, zero_for_one: bool) -> SwapResult:
    """UniswapV3Pool.swap for an exact input, on the given state (no price limit)."""
    sqrt_p, liquidity, tick = state.sqrt_price_x96, state.liquidity, state.tick
    remaining, out = amount_in, 0
    lo_edge, hi_edge = state.window if state.window else (MIN_TICK, MAX_TICK)
    if zero_for_one:
        crossings = sorted((t for t in state.ticks if t <= tick), reverse=True)
        edge = sqrt_ratio_at_tick(max(lo_edge, MIN_TICK)) if state.window else MIN_SQRT_RATIO + 1
    else:
        crossings = sorted(t for t in state.ticks if t > tick)
        edge = sqrt_ratio_at_tick(min(hi_edge, MAX_TICK)) if state.window else MAX_SQRT_RATIO - 1
    for next_tick in [*crossings, None]:
        if remaining <= 0:
            break
        target = edge if next_tick is None else sqrt_ratio_at_tick(next_tick)
        if zero_for_one:
            target = max(target, edge)
        else:
            target = min(target, edge)
        if liquidity > 0 and target != sqrt_p:
            sqrt_p, used, got, fee = swap_step(sqrt_p, target, liquidity, remaining,
                                               state.fee_pips)
            remaining -= used + fee
            out += got
        else:
            sqrt_p = target
        if next_tick is None or sqrt_p != target:
            break
        net = state.ticks[next_tick]
        liquidity += -net if zero_for_one else net
        if liquidity < 0:
            raise ValueError(f"negative liquidity after crossing tick {next_tick}")
    return SwapResult(amount_in - remaining, out, sqrt_p, remaining <= 0)


def spot_raw(sqrt_price_x96: int) -> float:
    """Raw token1 per raw token0 at a sqrt price."""
    return (sqrt_price_x96 / Q96) ** 2


def sell_slippage(state: PoolState, amount_raw: int, *, sell_token0: bool) -> float:
    """Fraction of the sell's value at the pool's mid price that the seller does not get.

    ``1 - amount_out / (amount_in * mid)``: price impact plus the pool fee (what leaving
    the position through this pool costs). Liquidity running out counts as a total loss of the
    unfilled part.
    """
    if amount_raw <= 0:
        return 0.0
    if state.liquidity <= 0 and not state.ticks:
        return 1.0
    result = simulate_exact_input(state, amount_raw, zero_for_one=sell_token0)
    mid = spot_raw(state.sqrt_price_x96)
    fair = amount_raw * mid if sell_token0 else amount_raw / mid
    return min(1.0, max(0.0, 1.0 - result.amount_out / fair))
