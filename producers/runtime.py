"""What every producer loop needs: clean stop on Ctrl-C/SIGTERM and event-time pacing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from types import TracebackType


class StopSignal:
    """Turns SIGINT/SIGTERM into an event the loop checks between records.

    The loop then stops taking new records, flushes what it already handed to the
    producer and prints its summary, instead of dying with records in the buffer. A second
    signal exits at once.
    """

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.signum: int | None = None
        self._installed: list[int] = []

    def _fire(self, signum: int) -> None:
        if self.event.is_set():
            # A second Ctrl-C means "now": die by the signal's default action, without
            # waiting for a flush to an unreachable broker.
            print("second signal: exiting without flushing", file=sys.stderr, flush=True)
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.signum = signum
        self.event.set()
        print(f"{signal.Signals(signum).name}: stopping after flushing what was sent "
              "(again to exit at once)", file=sys.stderr, flush=True)

    @property
    def stopped(self) -> bool:
        return self.event.is_set()

    def __enter__(self) -> StopSignal:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, self._fire, signum)
                self._installed.append(signum)
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        loop = asyncio.get_running_loop()
        for signum in self._installed:
            loop.remove_signal_handler(signum)

    def exit_code(self, ok: int = 0) -> int:
        """128 + signal number when stopped by a signal (the shell's convention)."""
        return 128 + self.signum if self.signum is not None else ok


class Pacer:
    """Releases records when wall time catches up with their event time / ``speed``."""

    def __init__(self, speed: float | None, stop: asyncio.Event) -> None:
        self.speed = speed
        self.stop = stop
        self._origin_event: float | None = None
        self._origin_wall = 0.0

    async def wait_for(self, event_ts: float) -> None:
        if self.speed is None:
            return
        if self._origin_event is None:
            self._origin_event, self._origin_wall = event_ts, time.monotonic()
            return
        due = self._origin_wall + (event_ts - self._origin_event) / self.speed
        delay = due - time.monotonic()
        if delay > 0.001:
            # Pacing, not synchronisation: wake early only when asked to stop.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), delay)
