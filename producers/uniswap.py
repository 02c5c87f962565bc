"""Uniswap v3 pool state -> ``slippage_bps`` ticks (the liquidity signal).

Input: hourly pool state rows (``timestamp, poolTick, poolLiquidity, token0, token1, dec0,
dec1``), e.g. the USDC/USDT 0.01 % pool in ``../shared/data/raw/``. Output: one tick per
row carrying the slippage of selling ``--notional`` USD (100,000 by default) of the token.

The math, in raw (integer-unit) terms. Price ``P = 1.0001**tick`` is raw token1 per raw
token0 and ``L`` the in-range liquidity. Selling ``dx`` raw token0 moves
``sqrtP' = L*sqrtP / (L + dx*sqrtP)`` and pays out ``dy = L*(sqrtP - sqrtP')``, so the
effective price over spot is ``(dy/dx) / P = L / (L + dx*sqrtP)`` and

    slippage = 1 - effective/spot = dx*sqrtP / (L + dx*sqrtP)

Selling ``dy`` raw token1 symmetrically gives ``dy / (L*sqrtP + dy)``. Decimals enter only
through the raw amount (``dx = amount * 10**dec0``); they cancel in the ratio. The pool fee
is left out: this is price impact, the part that grows when liquidity leaves.

Approximation: the whole sell is priced against the *current* in-range liquidity, as if
that liquidity extended over every tick the price crosses. Real pools usually hold more
liquidity in the neighbouring ticks, so this over-states the impact: an upper bound on the
depth loss, exact only while the sell stays inside the current tick range. When in-range
liquidity collapses (USDC/USDT on 2023-03-11 fell from ~1e15 to ~1e10) the bound jumps from
a fraction of a basis point to thousands, which is the signal wanted.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from monitor.chains import CHAINS, normalize_address

from . import univ3math
from .options import add_kafka_arguments, parse_speed
from .univ3math import PoolState, sqrt_ratio_at_tick

if TYPE_CHECKING:
    from monitor.config import Config
    from monitor.tickfiles import Row
    from monitor.ticks import Tick

DESCRIPTION = """Turn Uniswap v3 pool state (hourly poolTick + in-range poolLiquidity) into
slippage_bps ticks: the price impact of selling --notional USD of the token against the current
in-range liquidity. An upper bound on the real impact (liquidity in neighbouring ticks is
ignored); see the module documentation for the math."""

#: The spec's slippage signal is the sell of 100,000 USD.
NOTIONAL_USD = 100_000.0
BASE = 1.0001


def spot_price(tick: int, dec0: int, dec1: int) -> float:
    """Human price of one token0 in token1."""
    return math.pow(BASE, tick) * 10.0 ** (dec0 - dec1)


def sell_slippage(liquidity: float, tick: int, amount_raw: float, *, sell_token0: bool) -> float:
    """Fraction lost to price impact selling ``amount_raw`` raw units (see module doc).

    The swap runs through :mod:`producers.univ3math`, the exact pool math the live adapter
    uses too; with only the in-range liquidity known and no fee it reduces to the closed
    form above.
    """
    state = PoolState(sqrt_ratio_at_tick(tick), tick, int(liquidity))
    return univ3math.sell_slippage(state, int(amount_raw), sell_token0=sell_token0)


def slippage_bps(liquidity: float, tick: int, dec0: int, dec1: int, *, sell_token0: bool,
                 notional_usd: float = NOTIONAL_USD, quote_usd: float = 1.0) -> float:
    """Slippage in bp of selling ``notional_usd`` worth of the token.

    The token's USD price is its pool price in the other token times ``quote_usd`` (the
    other token's USD price, 1.0 for a USD stablecoin pair).
    """
    p0 = spot_price(tick, dec0, dec1)  # token0 in token1
    if sell_token0:
        amount_raw = notional_usd / (p0 * quote_usd) * 10.0 ** dec0
    else:
        amount_raw = notional_usd / (quote_usd / p0) * 10.0 ** dec1
    return 1e4 * sell_slippage(liquidity, tick, amount_raw, sell_token0=sell_token0)


def read_pool_state(
    path: Path, *, chain: str, token: str, symbol: str, side: str | None = None,
    notional_usd: float = NOTIONAL_USD, with_price: bool = False, quote_usd: float = 1.0,
) -> Iterator[Row]:
    """Rows of a pool-state CSV -> slippage ticks, or :class:`BadRow` with the line number.

    ``side`` (``token0``/``token1``) says which pool token is ours; by default the one whose
    symbol column equals ``symbol``.
    """
    from monitor.tickfiles import BadRow
    from monitor.ticks import BadTick, make_tick

    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        need = {"timestamp", "poolTick", "poolLiquidity", "dec0", "dec1"}
        missing = need - set(reader.fieldnames or ())
        if missing:
            yield BadRow(str(path), 1, "bad_header", f"missing columns {sorted(missing)}")
            return
        for line, rec in enumerate(reader, start=2):
            try:
                ours = side or _side_of(rec, symbol)
                tick, dec0, dec1 = int(rec["poolTick"]), int(rec["dec0"]), int(rec["dec1"])
                liquidity = float(rec["poolLiquidity"])
                sell0 = ours == "token0"
                bps = slippage_bps(liquidity, tick, dec0, dec1, sell_token0=sell0,
                                   notional_usd=notional_usd, quote_usd=quote_usd)
                price = None
                if with_price:
                    p0 = spot_price(tick, dec0, dec1)
                    price = format((p0 if sell0 else 1.0 / p0) * quote_usd, ".10g")
                yield make_tick(rec["timestamp"], chain, token, symbol, price_usd=price,
                                slippage_bps=round(bps, 4), source="uniswap-v3")
            except BadTick as exc:
                yield BadRow(str(path), line, exc.reason, exc.detail)
            except (ValueError, TypeError, OverflowError) as exc:
                yield BadRow(str(path), line, "bad_pool_state", str(exc)[:200])


def _side_of(rec: dict[str, str], symbol: str) -> str:
    for side in ("token0", "token1"):
        if rec.get(side, "").strip().upper() == symbol.strip().upper():
            return side
    raise ValueError(f"{symbol!r} is neither token0 {rec.get('token0')!r} nor token1 "
                     f"{rec.get('token1')!r}; pass --side")


def _address(text: str) -> str:
    address = normalize_address(text)
    if address is None:
        raise argparse.ArgumentTypeError(f"not a 0x + 40 hex digit address: {text!r}")
    return address


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, metavar="FILE",
                        help="pool state CSV: timestamp, poolTick, poolLiquidity (in range), "
                             "token0, token1, dec0, dec1")
    parser.add_argument("--chain", required=True, choices=CHAINS, help="chain of the token")
    parser.add_argument("--token", required=True, type=_address, metavar="0x...",
                        help="contract address of the token the ticks are about")
    parser.add_argument("--symbol", required=True, help="its symbol (also picks the pool side)")
    parser.add_argument("--side", choices=("token0", "token1"),
                        help="which pool token is ours (default: by --symbol)")
    parser.add_argument("--notional", type=float, default=NOTIONAL_USD, metavar="USD",
                        help="sell size in USD (default 100000, the spec's slippage signal)")
    parser.add_argument("--with-price", action="store_true",
                        help="also put the pool's spot price into price_usd (assumes the "
                             "other token is worth --quote-usd)")
    parser.add_argument("--quote-usd", type=float, default=1.0, metavar="USD",
                        help="USD price of the other pool token (default 1.0)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="FILE", help="write a canonical tick CSV (- = stdout)")
    where.add_argument("--publish", action="store_true", help="publish to the ticks topic")
    parser.add_argument("--speed", type=parse_speed, default=None, metavar="60x|max",
                        help="with --publish: pace by event time (default max)")
    add_kafka_arguments(parser)


def run(args: argparse.Namespace, config: Config) -> int:
    # Imported here, not for --help: aiokafka (bench_cli.py).
    from monitor.tickfiles import BadRow

    from .csvout import write_ticks_file
    from .kafka_out import bootstrap_from, open_sender, run_produce
    from .publish import publish_rows
    from .runtime import StopSignal

    if not args.file.is_file():
        print(f"depeg-monitor produce uniswap: no such file: {args.file}", file=sys.stderr)
        return 2
    bad: list[BadRow] = []

    def ticks() -> Iterator[Tick]:
        for row in read_pool_state(args.file, chain=args.chain, token=args.token,
                                   symbol=args.symbol, side=args.side,
                                   notional_usd=args.notional, with_price=args.with_price,
                                   quote_usd=args.quote_usd):
            if isinstance(row, BadRow):
                bad.append(row)
                print(f"{row.path}:{row.line}: {row.reason}: {row.detail}", file=sys.stderr)
                continue
            yield row

    if args.out:
        written = write_ticks_file(ticks(), args.out)
        print(f"uniswap: wrote {written} slippage ticks to {args.out}, {len(bad)} bad rows",
              file=sys.stderr)
        return 0 if written or not bad else 1

    async def main() -> int:
        bootstrap = bootstrap_from(args.bootstrap_servers, config.kafka, config)
        with StopSignal() as stop:
            sender = await open_sender(bootstrap, config.kafka)
            try:
                summary = await publish_rows(ticks(), sender, speed=args.speed, stop=stop.event)
            finally:
                await sender.close()
            print(summary.describe(f"uniswap to {config.kafka.ticks_topic}") +
                  f", {len(bad)} bad pool rows")
            return stop.exit_code()

    return run_produce("uniswap", main)
