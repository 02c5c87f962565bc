"""``depeg-monitor produce simulate``: synthetic tokens for demos and load tests.

The ticks come from the pure generator in :mod:`producers.synthetic`; this module only
paces them and publishes them (or writes them to a CSV for ``produce replay`` /
``depeg-monitor replay``). Event time runs ``--time-scale`` times faster than wall time,
so with ``--time-scale 60`` an hour of market passes in a minute and a demo shows tier
changes quickly.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from monitor.timefmt import parse_ts

from .options import add_kafka_arguments

if TYPE_CHECKING:
    from monitor.config import Config

DESCRIPTION = """Generate synthetic pegged tokens for demos and load tests: calm noise, depegs
that recover, collapses, above-peg premiums and liquidity drains, across the seven chains, with
USD, EUR, gold and NAV pegs. Deterministic per --seed. Example demo (tier changes within a
minute or two): produce simulate --tokens 20 --rate 200 --time-scale 60"""


def _positive(kind: type[int] | type[float]) -> argparse._ActionType:
    def parse(text: str) -> float:
        value = kind(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive, not {text!r}")
        return value

    return parse


def _timestamp(text: str) -> float:
    try:
        return parse_ts(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokens", type=_positive(int), default=10, metavar="N",
                        help="number of tokens, spread over the seven chains; the first five "
                             "show one scenario each (calm, depeg, collapse, premium, drain), "
                             "the rest are mostly calm (default 10)")
    parser.add_argument("--rate", type=_positive(float), default=100.0, metavar="TICKS_PER_S",
                        help="ticks per wall-clock second over all tokens (default 100); each "
                             "token ticks every time_scale*tokens/rate event seconds")
    parser.add_argument("--duration", type=_positive(float), default=None, metavar="S",
                        help="stop after S wall-clock seconds (event span S*time_scale); "
                             "default: until Ctrl-C/SIGTERM (required with --out)")
    parser.add_argument("--time-scale", type=_positive(float), default=1.0, metavar="X",
                        help="event time runs X times faster than wall time (60 = an hour "
                             "per minute, for demos); default 1")
    parser.add_argument("--seed", type=int, default=1,
                        help="random seed: same seed, same tokens, addresses and ticks")
    parser.add_argument("--start", type=_timestamp, default=None, metavar="TS",
                        help="event time of the first tick (ISO 8601 or epoch seconds; "
                             "default now)")
    parser.add_argument("--out", metavar="FILE",
                        help="write a canonical tick CSV (- for stdout) instead of publishing")
    parser.add_argument("--cross-chain", action="store_true",
                        help="also simulate USDC on eth (calm) and arb (depegging) under their "
                             "real addresses: with a registry naming both as one asset (the "
                             "committed Token List: DEPEG_REGISTRY__PATH=deploy/registry/"
                             "pegged-tokens.tokenlist.json) the spread stage publishes their "
                             "cross-chain spread")
    parser.add_argument("--list-tokens", action="store_true",
                        help="print the simulated tokens (chain, address, symbol, peg, "
                             "scenario) and exit")
    add_kafka_arguments(parser)


def run(args: argparse.Namespace, config: Config) -> int:
    # Imported here, not for --help: aiokafka and the logging stack (bench_cli.py).
    from monitor.logs import get_logger
    from monitor.progress import Progress

    from .csvout import write_ticks_file
    from .kafka_out import bootstrap_from, open_sender, run_produce
    from .publish import publish_rows
    from .runtime import StopSignal
    from .synthetic import cross_chain_pair, generate, make_tokens

    tokens = make_tokens(args.tokens, args.seed)
    if args.cross_chain:
        tokens += cross_chain_pair(len(tokens), args.seed)
    if args.list_tokens:
        for t in tokens:
            print(f"{t.chain}:{t.address} {t.symbol} peg={t.peg_kind}({t.peg0:.6g}) "
                  f"scenario={t.scenario}")
        return 0
    start = args.start if args.start is not None else float(int(time.time()))
    interval = args.time_scale * len(tokens) / args.rate  # --rate: over all, pair included
    span = args.duration * args.time_scale if args.duration is not None else None
    ticks = generate(tokens, seed=args.seed, start=start, interval=interval, duration=span)
    if args.out:
        if span is None:
            print("depeg-monitor produce simulate: --out needs --duration", file=sys.stderr)
            return 2
        written = write_ticks_file(ticks, args.out)
        print(f"simulate: wrote {written} ticks for {len(tokens)} tokens to {args.out}",
              file=sys.stderr)
        return 0

    async def main() -> int:
        bootstrap = bootstrap_from(args.bootstrap_servers, config.kafka, config)
        with StopSignal() as stop:
            sender = await open_sender(bootstrap, config.kafka)
            log = get_logger(__name__)
            log.info("produce.simulate_started", tokens=len(tokens), rate=args.rate,
                     time_scale=args.time_scale, interval_s=interval,
                     topic=config.kafka.ticks_topic)
            total = int(args.duration * args.rate) if args.duration is not None else 0
            try:
                with Progress(total, label="simulate") as progress:
                    progress.enabled = progress.enabled and total > 0
                    summary = await publish_rows(ticks, sender, speed=args.time_scale,
                                                 stop=stop.event, progress=progress)
            finally:
                await sender.close()
            print(summary.describe(f"simulate to {config.kafka.ticks_topic}"))
            return stop.exit_code()

    return run_produce("simulate", main)
