"""``depeg-monitor produce vaults``: publish vault facts to ``vaults.facts``.

Two forms, one sub-command (argparse cannot mix a file list with a nested sub-command):

- ``produce vaults FILE... [--speed 60x|max]``: fact files (JSON lines, DESIGN.md "Vault
  facts") merged by event time, every line validated the way the vault daemon validates it;
  bad lines are reported with file:line and counted, never published;
- ``produce vaults simulate --vaults N``: synthetic vaults (:mod:`producers.vault_synthetic`)
  across the 8 protocol labels, 4 contract types and 6 chains, with incidents (redemptions
  closing, bad debt, an underlying that depegs in ``produce simulate`` with the same seed).
"""

from __future__ import annotations

import argparse
import heapq
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from .options import add_kafka_arguments, parse_speed

if TYPE_CHECKING:
    from monitor.config import Config
    from monitor.tickfiles import BadRow
    from monitor.vaults.facts import FactUpdate

    from .publish import PublishSummary

DESCRIPTION = """Publish vault facts to vaults.facts, keyed chain:vault.

  produce vaults FILE... [--speed 60x|max]
      JSON-lines fact files (DESIGN.md "Vault facts"), merged by event time. Each line is
      validated as the vault daemon validates it; bad lines are reported and skipped.
  produce vaults simulate --vaults N [--tokens M] [--seed S] [--rate R] [--time-scale X]
      Synthetic vaults across the 8 protocol labels, 4 contract types and 6 chains, with
      incidents: redemptions closing, bad debt, and underlyings taken from the tokens of
      `produce simulate --tokens M --seed S`, so their depegs re-rate the vaults live.
      --out FILE writes the facts as JSON lines instead (needs --duration).

Ctrl-C/SIGTERM stops after flushing what was sent. Exit code: 0 done, 1 error, 2 usage."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("items", nargs="+", metavar="FILE|simulate",
                        help="fact files (JSON lines), or the word simulate")
    parser.add_argument("--speed", type=parse_speed, default=None, metavar="60x|max",
                        help="files: pace by event time, N times faster than real time; "
                             "max (default) sends as fast as possible")
    sim = parser.add_argument_group("simulate")
    sim.add_argument("--vaults", type=int, default=20, metavar="N",
                     help="number of synthetic vaults (default 20)")
    sim.add_argument("--tokens", type=int, default=10, metavar="M",
                     help="underlyings come from `produce simulate --tokens M` (default 10)")
    sim.add_argument("--seed", type=int, default=1, help="same seed, same vaults and facts")
    sim.add_argument("--rate", type=float, default=20.0, metavar="FACTS_PER_S",
                     help="fact records per wall-clock second over all vaults (default 20)")
    sim.add_argument("--time-scale", type=float, default=1.0, metavar="X",
                     help="event time runs X times faster than wall time (default 1)")
    sim.add_argument("--duration", type=float, default=None, metavar="S",
                     help="stop after S wall-clock seconds (default: until Ctrl-C)")
    sim.add_argument("--start", default=None, metavar="TS",
                     help="event time of the first facts (ISO 8601 or epoch; default now)")
    sim.add_argument("--out", metavar="FILE", help="write JSON lines here instead of publishing")
    add_kafka_arguments(parser, "vaults.facts_topic")


def read_fact_files(paths: list[Path]) -> Iterator[FactUpdate | BadRow]:
    """Every line of every file, validated; good updates merged by event time (files are
    each expected in time order, as the contract's producers write them)."""
    from monitor.tickfiles import BadRow
    from monitor.vaults.facts import BadFacts, decode_facts

    def one(path: Path) -> Iterator[tuple[float, int, FactUpdate | BadRow]]:
        with path.open("rb") as fh:
            last = float("-inf")
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    update = decode_facts(line.strip())
                except BadFacts as exc:
                    yield last, number, BadRow(str(path), number, exc.reason, exc.detail)
                    continue
                last = update.ts
                yield update.ts, number, update

    for _, _, item in heapq.merge(*(one(p) for p in paths), key=lambda x: (x[0], x[1])):
        yield item


async def _publish(items: Iterable[FactUpdate | BadRow], config: Config, bootstrap: str,
                   speed: float | None, total: int, label: str) -> PublishSummary:
    from monitor.progress import Progress

    from .kafka_out import open_fact_sender
    from .publish import publish_rows
    from .runtime import StopSignal

    with StopSignal() as stop:
        sender = await open_fact_sender(bootstrap, config)
        try:
            with Progress(total, label=label) as progress:
                progress.enabled = progress.enabled and total > 0
                summary = await publish_rows(items, sender, speed=speed, stop=stop.event,
                                             progress=progress, unit="fact records")
        finally:
            await sender.close()
        print(summary.describe(f"{label} to {config.vaults.facts_topic}"))
        summary.interrupted = summary.interrupted or stop.event.is_set()
        return summary


# The machinery (aiokafka, asyncio, the fact codec) is imported by the functions that run,
# not for --help (bench_cli.py).
def run(args: argparse.Namespace, config: Config) -> int:
    from .kafka_out import ProduceError

    try:
        if args.items[0] == "simulate":
            return _simulate(args, config)
        return _files(args, config)
    except ProduceError as exc:
        print(f"depeg-monitor produce vaults: {exc}", file=sys.stderr)
        return exc.exit_code


def _files(args: argparse.Namespace, config: Config) -> int:
    import asyncio

    from .kafka_out import bootstrap_from
    from .replay import count_lines

    paths = [Path(p) for p in args.items]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"depeg-monitor produce vaults: no such file: {', '.join(missing)}",
              file=sys.stderr)
        return 2
    bootstrap = bootstrap_from(args.bootstrap_servers, config.kafka, config)
    summary = asyncio.run(_publish(read_fact_files(paths), config, bootstrap, args.speed,
                                   count_lines(paths), "vaults"))
    return 0 if summary.published or not summary.bad else 1


def _simulate(args: argparse.Namespace, config: Config) -> int:
    import asyncio

    from monitor.timefmt import parse_ts
    from monitor.vaults.facts import encode_update

    from .kafka_out import bootstrap_from
    from .vault_synthetic import generate_facts, make_vaults

    if len(args.items) > 1:
        print("depeg-monitor produce vaults simulate: takes no files", file=sys.stderr)
        return 2
    if args.vaults <= 0 or args.rate <= 0 or args.time_scale <= 0:
        print("depeg-monitor produce vaults simulate: --vaults, --rate and --time-scale must "
              "be positive", file=sys.stderr)
        return 2
    start = parse_ts(args.start) if args.start else float(int(time.time()))
    interval = args.time_scale * args.vaults / args.rate
    span = args.duration * args.time_scale if args.duration is not None else None
    vaults = make_vaults(args.vaults, args.seed, tokens=args.tokens)
    updates = generate_facts(vaults, seed=args.seed, start=start, interval=interval,
                             duration=span)
    if args.out:
        if span is None:
            print("depeg-monitor produce vaults simulate: --out needs --duration",
                  file=sys.stderr)
            return 2
        written = 0
        with open(args.out, "wb") as fh:
            for update in updates:
                fh.write(encode_update(update) + b"\n")
                written += 1
        print(f"vaults simulate: wrote {written} fact records for {len(vaults)} vaults to "
              f"{args.out}", file=sys.stderr)
        return 0
    bootstrap = bootstrap_from(args.bootstrap_servers, config.kafka, config)
    total = int(args.duration * args.rate) + args.vaults if args.duration is not None else 0
    asyncio.run(_publish(updates, config, bootstrap, args.time_scale, total, "vaults simulate"))
    return 0
