"""The publishing loop shared by every producer: pace, send, count, stop cleanly."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from monitor.logs import get_logger
from monitor.progress import Progress
from monitor.tickfiles import BadRow, Row
from monitor.timefmt import format_ts

from .kafka_out import TickSender
from .runtime import Pacer

log = get_logger(__name__)

#: Bad rows logged one by one; beyond this only the count grows (a broken file must not
#: flood the log).
BAD_ROWS_LOGGED = 100


@dataclass
class PublishSummary:
    published: int = 0
    bad: int = 0
    bad_rows: list[BadRow] = field(default_factory=list)
    first_ts: float | None = None
    last_ts: float | None = None
    elapsed: float = 0.0
    interrupted: bool = False

    def describe(self, what: str) -> str:
        rate = self.published / self.elapsed if self.elapsed > 0 else 0.0
        span = (
            f", event time {format_ts(self.first_ts)} .. {format_ts(self.last_ts)}"
            if self.first_ts is not None and self.last_ts is not None else ""
        )
        stopped = " (interrupted)" if self.interrupted else ""
        return (f"{what}: published {self.published} ticks, {self.bad} bad rows skipped, "
                f"{self.elapsed:.1f}s ({rate:.0f} ticks/s){span}{stopped}")


async def publish_rows(
    rows: Iterable[Row],
    sender: TickSender,
    *,
    speed: float | None,
    stop: asyncio.Event,
    progress: Progress | None = None,
) -> PublishSummary:
    """Publish good rows in order, collect bad ones; stop early when ``stop`` is set."""
    summary = PublishSummary()
    pacer = Pacer(speed, stop)
    started = time.monotonic()
    seen = 0
    for row in rows:
        if stop.is_set():
            summary.interrupted = True
            break
        seen += 1
        if isinstance(row, BadRow):
            summary.bad += 1
            if summary.bad <= BAD_ROWS_LOGGED:
                summary.bad_rows.append(row)
                log.warning("bad_row", path=row.path, line=row.line, reason=row.reason,
                            detail=row.detail)
            continue
        await pacer.wait_for(row.ts)
        if stop.is_set():
            summary.interrupted = True
            break
        await sender.send(row)
        summary.published += 1
        if summary.first_ts is None:
            summary.first_ts = row.ts
        summary.last_ts = row.ts
        if seen % 1000 == 0:
            if progress is not None:
                progress.update(seen)
            # Let signal handlers and the producer's I/O run even when nothing awaits.
            await asyncio.sleep(0)
    summary.elapsed = time.monotonic() - started
    return summary



def add_kafka_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT[,...]",
                        help="Kafka brokers (default: kafka.bootstrap_servers / "
                             "DEPEG_KAFKA__BOOTSTRAP_SERVERS); the ticks topic is "
                             "kafka.ticks_topic and is created with kafka.partitions if missing")


