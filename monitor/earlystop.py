"""A stop asked for while a service is still starting: remembered, and honoured once the
service's event loop handles signals.

Before its loop runs, a service spends 100-300 ms importing; SIGTERM's default action
would kill it by the signal, which a supervisor reads as a crash. Raising ``SystemExit``
from the handler is not reliable either: the exception is raised wherever the main thread
happens to be, and an import can lose it (seen with Python 3.11 while ``compile()`` built
aiohttp's ``cookiejar`` module: the import went on, the service started and ran as if it
had never been told to stop, until its supervisor killed it). So the handler only records
the signal; :func:`hand_over` gives the signals to the service's event loop and returns
the stop recorded before, which the service (``services.run_until_signalled``, ``run``)
honours by exiting 0 without starting.

The record lives on the handler object itself, so nothing else in the process holds it.
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: installed before a service's imports
    import asyncio
    from collections.abc import Callable
    from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class EarlyStop:
    """The handler: the first signal's name, or None while none has arrived."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name
            print(f"depeg-monitor: {self.signal_name} before the service started: "
                  "stopping before it starts", file=sys.stderr, flush=True)


def install() -> None:
    """Record SIGTERM and SIGINT until the service's loop installs its own handlers."""
    handler = EarlyStop()
    for signum in SIGNALS:
        signal.signal(signum, handler)


def hand_over(loop: asyncio.AbstractEventLoop, callback: Callable[[], object]) -> str | None:
    """Make ``callback`` the loop's handler of SIGTERM and SIGINT; the name of the signal
    that arrived before, if one did. The early handler is taken before the loop replaces
    it and read after, so a signal in between is recorded on it, not lost."""
    early = signal.getsignal(signal.SIGTERM)
    for signum in SIGNALS:
        loop.add_signal_handler(signum, callback)
    return early.signal_name if isinstance(early, EarlyStop) else None
