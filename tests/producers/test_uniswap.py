"""Uniswap v3 pool state -> slippage ticks: the math by hand, the real 2023-03-11 collapse."""

from __future__ import annotations

import math
import statistics
from decimal import Decimal, localcontext
from pathlib import Path

import pytest

from monitor.kafka.embedded import EmbeddedBroker
from monitor.tickfiles import BadRow
from monitor.ticks import Tick
from producers.uniswap import read_pool_state, sell_slippage, slippage_bps
from tests.conftest import data_file

USDC = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
POOL = "raw/uniswapv3_USDC_USDT_1bp_hourly_pool_state_2022-01_to_2026-01.csv"


def bps(tick: Tick) -> float:
    """A pool tick's slippage (every tick the producer makes has one)."""
    assert tick.slippage_bps is not None
    return tick.slippage_bps


def price(tick: Tick) -> float:
    assert tick.price is not None
    return tick.price


def step_by_step_token0(liquidity: float, tick: int, dx: float) -> float:
    """The v3 swap within one range, spelled out in 50-digit decimals (the float version
    loses the answer to cancellation): new sqrt price, amount out, 1 - effective/spot."""
    with localcontext() as ctx:
        ctx.prec = 50
        big_l, amount = Decimal(liquidity), Decimal(dx)
        sqrt_p = Decimal("1.0001") ** (Decimal(tick) / 2)
        sqrt_p_new = big_l * sqrt_p / (big_l + amount * sqrt_p)
        dy = big_l * (sqrt_p - sqrt_p_new)
        return float(1 - (dy / amount) / sqrt_p**2)


def step_by_step_token1(liquidity: float, tick: int, dy: float) -> float:
    with localcontext() as ctx:
        ctx.prec = 50
        big_l, amount = Decimal(liquidity), Decimal(dy)
        sqrt_p = Decimal("1.0001") ** (Decimal(tick) / 2)
        sqrt_p_new = sqrt_p + amount / big_l
        dx = big_l * (1 / sqrt_p - 1 / sqrt_p_new)
        return float(1 - (dx / amount) / (1 / sqrt_p**2))


def test_hand_computed_case_at_tick_zero() -> None:
    # Six-decimal pair at parity, L = 1.4e10: selling 100k = 1e11 raw units loses
    # 1e11 / (1.4e10 + 1e11) = 87.7193 % to price impact.
    assert slippage_bps(1.4e10, 0, 6, 6, sell_token0=True) == pytest.approx(8771.9298, abs=1e-3)
    # Deep pool, L = 1e15: 1e11 / (1e15 + 1e11) = 0.99990 bp.
    assert slippage_bps(1e15, 0, 6, 6, sell_token0=True) == pytest.approx(0.99990001, rel=1e-7)
    assert slippage_bps(1e15, 0, 6, 6, sell_token0=False) == pytest.approx(0.99990001, rel=1e-7)


@pytest.mark.parametrize(("liquidity", "tick"), [(1e15, 0), (2.5e12, -751), (3e17, 120)])
def test_closed_form_matches_the_swap_formula(liquidity: float, tick: int) -> None:
    dx = 1e11
    # The swap runs in the pool's integer math (producers.univ3math): the output is rounded
    # down to a raw unit like the pool does, a few 1e-11 of 1e11 units (1e-7 bp).
    assert sell_slippage(liquidity, tick, dx, sell_token0=True) == pytest.approx(
        step_by_step_token0(liquidity, tick, dx), rel=1e-9, abs=1e-10)
    assert sell_slippage(liquidity, tick, dx, sell_token0=False) == pytest.approx(
        step_by_step_token1(liquidity, tick, dx), rel=1e-9, abs=1e-10)


def test_decimals_set_the_raw_amount() -> None:
    # An 18/6-decimal pair at a USD price of 1 for token0: tick where 1.0001**t * 1e12 == 1.
    tick = round(math.log(1e-12) / math.log(1.0001))
    bps = slippage_bps(1e18, tick, 18, 6, sell_token0=True)
    # Raw sell = 1e5 * 1e18 / p0; sqrtP ~ 1e-6 -> dx*sqrtP ~ 1e17, a tenth of L.
    p0 = 1.0001**tick * 1e12
    dx = 1e5 / p0 * 1e18
    want = dx * 1.0001 ** (tick / 2) / (1e18 + dx * 1.0001 ** (tick / 2))
    assert bps == pytest.approx(1e4 * want, rel=1e-9)
    assert 800 < bps < 1000


def test_empty_range_and_zero_amount() -> None:
    assert sell_slippage(0, 0, 1e11, sell_token0=True) == 1.0
    assert sell_slippage(1e15, 0, 0, sell_token0=True) == 0.0


def test_bad_pool_rows_are_reported_with_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "pool.csv"
    path.write_text(
        "hour,timestamp,block,poolTick,poolLiquidity,tickSpacing,token0,token1,dec0,dec1\n"
        "x,1640995200,1,-1,430394234327008495,1,USDC,USDT,6,6\n"
        "x,1640998800,2,banana,430394234327008495,1,USDC,USDT,6,6\n"
        "x,,3,-1,430394234327008495,1,USDC,USDT,6,6\n"
        "x,1641006000,4,-1,14139206705,1,USDC,USDT,6,6\n")
    rows = list(read_pool_state(path, chain="eth", token=USDC, symbol="USDC"))
    assert [(r.line, r.reason) for r in rows if isinstance(r, BadRow)] == [
        (3, "bad_pool_state"), (4, "bad_ts")]
    ticks = [r for r in rows if isinstance(r, Tick)]
    assert [t.ts for t in ticks] == [1640995200.0, 1641006000.0]
    assert ticks[0].slippage_bps is not None and ticks[0].slippage_bps < 0.01
    assert ticks[1].slippage_bps is not None and ticks[1].slippage_bps > 8000
    assert all(t.price is None and t.source == "uniswap-v3" for t in ticks)
    with pytest.raises(StopIteration):  # unknown symbol and no --side: every row is bad
        next(r for r in read_pool_state(path, chain="eth", token=USDC, symbol="DAI")
             if isinstance(r, Tick))


@pytest.mark.data
def test_march_2023_liquidity_collapse_shows_as_a_slippage_spike() -> None:
    path = data_file(POOL)
    ticks = [r for r in read_pool_state(path, chain="eth", token=USDC, symbol="USDC",
                                        with_price=True) if isinstance(r, Tick)]
    day = 86400
    collapse = 1678492800.0  # 2023-03-11T00:00Z
    before = [bps(t) for t in ticks if collapse - 30 * day <= t.ts < collapse - day]
    during = [bps(t) for t in ticks if collapse <= t.ts < collapse + day]
    assert before and during
    assert statistics.median(before) < 5  # bp: a deep pool, well under the 10 bp floor
    assert max(during) > 5000  # in-range liquidity fell ~5 orders of magnitude
    # The pool price shows the depeg at the same time (USDC in USDT terms).
    assert min(price(t) for t in ticks if collapse <= t.ts < collapse + day) < 0.9


POOL_ROWS = (
    "hour,timestamp,block,poolTick,poolLiquidity,tickSpacing,token0,token1,dec0,dec1\n"
    "x,1678406400,1,1,230753998207201862,1,USDC,USDT,6,6\n"
    "x,1678514400,2,-751,14139206705,1,USDC,USDT,6,6\n"
)


def run_produce(argv: list[str]) -> int:
    import argparse

    from monitor.config import Config
    from producers.command import command

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return command.run(parser.parse_args(argv), Config())


def test_cli_writes_replayable_ticks_for_the_token_side(tmp_path: Path) -> None:
    pool = tmp_path / "pool.csv"
    pool.write_text(POOL_ROWS)
    out = tmp_path / "ticks.csv"
    usdt = "0xdac17f958d2ee523a2206206994597c13d1ec7a5"
    assert run_produce(["uniswap", str(pool), "--chain", "eth", "--token", usdt, "--symbol",
                        "USDT", "--out", str(out)]) == 0
    from monitor.tickfiles import read_file

    ticks = [r for r in read_file(out) if isinstance(r, Tick)]
    assert [t.key for t in ticks] == [f"eth:{usdt}"] * 2
    # USDT is token1 here: selling it is priced with dy / (L*sqrtP + dy).
    s = 1.0001 ** (-751 / 2)
    dy = 1e5 * 1.0001**-751 * 1e6  # 100k USD of USDT, in raw units at the pool price
    assert ticks[1].slippage_bps == pytest.approx(1e4 * dy / (14139206705 * s + dy), abs=1e-3)


@pytest.mark.broker
def test_publish_puts_slippage_ticks_on_the_topic(
        broker: EmbeddedBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from monitor.ticks import decode_tick
    from tests.producers.kafka_readback import topic_reader

    pool = tmp_path / "pool.csv"
    pool.write_text(POOL_ROWS)
    assert run_produce(["uniswap", str(pool), "--chain", "eth", "--token", USDC, "--symbol",
                        "USDC", "--publish", "--bootstrap-servers",
                        broker.bootstrap_servers]) == 0
    assert "published 2 ticks" in capsys.readouterr().out
    records = topic_reader(broker.bootstrap_servers, "depeg.ticks", expect=2)
    ticks = [decode_tick(r.value) for r in sorted(records, key=lambda r: r.offset)]
    assert [r.key.decode() for r in records] == [f"eth:{USDC}"] * 2
    assert [t.source for t in ticks] == ["uniswap-v3"] * 2
    assert ticks[0].slippage_bps is not None and ticks[0].slippage_bps < 0.01
    assert ticks[1].slippage_bps is not None and ticks[1].slippage_bps > 8000
