"""The publishing loop shared by every producer: pace, send, count, stop cleanly."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from monitor.progress import Progress
from monitor.tickfiles import BadRow
from monitor.timefmt import format_ts

from .runtime import Pacer

#: Bad rows reported one by one (``file:line: reason: detail`` on stderr, as they are met);
#: beyond this only the count grows, so a broken file cannot flood the terminal or the logs.
BAD_ROWS_REPORTED = 100


class Timed(Protocol):
    """What a producer publishes: anything with an event time (a Tick, a vault FactUpdate)."""

    @property
    def ts(self) -> float: ...


T = TypeVar("T", bound=Timed)
T_contra = TypeVar("T_contra", contravariant=True)


class Sender(Protocol[T_contra]):
    async def send(self, item: T_contra, /) -> None: ...


@dataclass
class PublishSummary:
    published: int = 0
    bad: int = 0
    bad_rows: list[BadRow] = field(default_factory=list)
    first_ts: float | None = None
    last_ts: float | None = None
    elapsed: float = 0.0
    interrupted: bool = False
    #: What one published record is, for the summary line.
    unit: str = "ticks"

    def describe(self, what: str) -> str:
        rate = self.published / self.elapsed if self.elapsed > 0 else 0.0
        span = (
            f", event time {format_ts(self.first_ts)} .. {format_ts(self.last_ts)}"
            if self.first_ts is not None and self.last_ts is not None else ""
        )
        stopped = " (interrupted)" if self.interrupted else ""
        return (f"{what}: published {self.published} {self.unit}, {self.bad} bad rows "
                f"skipped, {self.elapsed:.1f}s ({rate:.0f} {self.unit}/s){span}{stopped}")


async def publish_rows(
    rows: Iterable[T | BadRow],
    sender: Sender[T],
    *,
    speed: float | None,
    stop: asyncio.Event,
    progress: Progress | None = None,
    unit: str = "ticks",
) -> PublishSummary:
    """Publish good rows in order; report and count bad ones; stop early when ``stop`` is set.

    ``speed`` paces by event time (None: as fast as the producer takes them).
    """
    summary = PublishSummary(unit=unit)
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
            if summary.bad <= BAD_ROWS_REPORTED:
                summary.bad_rows.append(row)
                print(f"{row.path}:{row.line}: {row.reason}: {row.detail}", file=sys.stderr)
            elif summary.bad == BAD_ROWS_REPORTED + 1:
                print(f"more than {BAD_ROWS_REPORTED} bad rows; only counting from here",
                      file=sys.stderr)
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
