"""``depeg-monitor produce replay FILE...``: publish tick files to ``depeg.ticks``.

Files (canonical CSV or JSON lines) are merged into one event-time-ordered stream with
:func:`monitor.tickfiles.merge_by_time`. Good rows are published keyed ``chain:token``;
bad rows are reported with file and line and counted, never published (the monitor would
only dead-letter them). ``--speed 60x`` paces by event time, ``max`` sends as fast as the
producer batches.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from .options import add_kafka_arguments, parse_speed

if TYPE_CHECKING:
    from monitor.config import Config

    from .publish import PublishSummary
    from .runtime import StopSignal

DESCRIPTION = """Publish tick files to the ticks topic in event-time order, keyed chain:token.
Files are canonical CSV (ts,chain,token,symbol,price_usd,peg_usd,slippage_bps; empty cell =
not observed) or JSON lines; several files are merged by time. Bad rows are reported with
file:line and counted, never published. Ctrl-C/SIGTERM stops after flushing what was sent
(a second signal exits at once). Exit code: 0 done, 1 error, 2 usage, 128+signal when stopped."""


def count_lines(paths: Iterable[Path]) -> int:
    """Rough row total for the progress bar (header lines included; it is a bar)."""
    total = 0
    for path in paths:
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                total += chunk.count(b"\n")
    return total


async def replay(paths: list[Path], bootstrap: str, config: Config, speed: float | None,
                 stop: StopSignal, resume: bool = False) -> PublishSummary:
    # Imported here, not for --help (as in run()).
    from monitor.kafka.topics import KafkaError
    from monitor.logs import get_logger
    from monitor.progress import Progress
    from monitor.tickfiles import merge_by_time, read_file

    from .kafka_out import ProduceError, open_sender
    from .publish import publish_rows
    from .resume import Resume, newest_per_token

    log = get_logger(__name__)
    sender = await open_sender(bootstrap, config.kafka)
    try:
        rows = merge_by_time(read_file(p) for p in paths)
        skip: Resume | None = None
        if resume:
            try:
                skip = Resume(await newest_per_token(bootstrap, config.kafka))
            except KafkaError as exc:
                raise ProduceError(f"cannot read {config.kafka.ticks_topic} to resume: "
                                   f"{exc}") from exc
            rows = skip.rows(rows)
        with Progress(count_lines(paths), label="replay") as progress:
            summary = await publish_rows(rows, sender, speed=speed, stop=stop.event,
                                         progress=progress)
        if skip is not None:
            log.info("produce.resumed", skipped=skip.skipped, tokens=len(skip.newest),
                     note="ticks already on the topic were not published again")
    finally:
        # Flush even when interrupted: what was handed over gets delivered.
        await sender.close()
    return summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE",
                        help="canonical tick CSV (ts,chain,token,symbol,price_usd,peg_usd,"
                             "slippage_bps) or JSON lines (.jsonl), each in time order")
    parser.add_argument("--speed", type=parse_speed, default=None, metavar="60x|max",
                        help="pace by event time, N times faster than real time (60x = an "
                             "hour per minute); max (default) sends as fast as possible")
    parser.add_argument("--resume", action="store_true",
                        help="skip every tick already on the ticks topic (per token, up to "
                             "its newest event time there): continue an interrupted replay "
                             "without duplicates, e.g. after `depeg-monitor run` restarted")
    add_kafka_arguments(parser)


def run(args: argparse.Namespace, config: Config) -> int:
    # Imported here, not for --help: aiokafka and the logging stack (bench_cli.py).
    from monitor.logs import get_logger

    from .kafka_out import bootstrap_from, run_produce
    from .runtime import StopSignal

    log = get_logger(__name__)
    paths: list[Path] = args.files
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(f"depeg-monitor produce replay: no such file: {', '.join(missing)}",
              file=sys.stderr)
        return 2

    async def main() -> int:
        with StopSignal() as stop:
            bootstrap = bootstrap_from(args.bootstrap_servers, config.kafka, config)
            summary = await replay(paths, bootstrap, config, args.speed, stop,
                                   resume=args.resume)
            print(summary.describe(f"replay to {config.kafka.ticks_topic}"))
            log.info("produce.replay_done", published=summary.published, bad=summary.bad,
                     interrupted=summary.interrupted)
            return stop.exit_code(0 if summary.published or not summary.bad else 1)

    return run_produce("replay", main)
