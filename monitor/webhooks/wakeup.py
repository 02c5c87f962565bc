"""How the delivery worker's loop waits: one future, resolved by whatever has work for it.

The loop sleeps until new deliveries were recorded (``wake``), a send finished or a slot
was freed (its own flag), the worker is stopping, or the poll interval passed. It waited
on those as ``asyncio.wait`` over a task per event: two tasks per wait, and a ``set()``
reached the loop three event-loop steps later (the event's waiter, the task that ends,
``asyncio.wait``'s callback), callbacks that came due meanwhile running first. Here a
:class:`Flag`'s ``set()`` resolves the loop's one :class:`Wakeup` future itself, after
as many steps as that flag's kind of work is worth waiting for:

* new deliveries (``wake``): none. The new event's claim is what its latency waits for;
  next to a busy neighbour, whose answers arrive as new events are recorded, the three
  steps let those answers be read and finished first.
* a finished send (the worker's own flag): two, then the future's own step, as before.
  The answers that arrived together are read and finished meanwhile and their outcomes
  share one cycle; woken at once, a neighbour's lone outcome took a cycle of its own just
  as the next event was being recorded, and the healthy endpoint's p99 next to a slow
  flaky one rose by a tenth (docs/performance.md, fifty-second pass).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["Flag", "Wakeup"]


class Flag(asyncio.Event):
    """An :class:`asyncio.Event` (``set``, ``is_set``, ``clear``, ``wait`` as ever) whose
    ``set()`` also calls ``on_set`` (a :meth:`Wakeup.wake`), ``steps`` event-loop steps
    later and only if the flag is still set then: work the loop took up meanwhile (it
    clears its flags as it reads them, before each cycle) wakes nothing."""

    def __init__(self, on_set: Callable[[], None], steps: int = 0) -> None:
        super().__init__()
        self._on_set = on_set
        self._steps = steps
        self._counting = False  # a countdown to on_set is under way

    def set(self) -> None:
        super().set()
        if not self._steps:
            self._on_set()
        elif not self._counting:
            self._counting = True
            asyncio.get_running_loop().call_soon(self._count, self._steps - 1)

    def _count(self, left: int) -> None:
        if left:
            asyncio.get_running_loop().call_soon(self._count, left - 1)
            return
        self._counting = False
        if self.is_set():
            self._on_set()


class Wakeup:
    """The one future a loop awaits in :meth:`wait`; :meth:`wake` resolves it. A wake
    while nothing waits (the loop in a cycle) is kept: the next :meth:`wait` returns at
    once, after one step of the event loop, unless :meth:`forget` dropped it first (the
    loop about to read its flags: the work it signalled is looked at then)."""

    def __init__(self) -> None:
        self._waiting: asyncio.Future[None] | None = None
        self._woken = False

    @property
    def waiting(self) -> bool:
        """Whether a :meth:`wait` is under way."""
        return self._waiting is not None

    def wake(self) -> None:
        waiting = self._waiting
        if waiting is None:
            self._woken = True
        elif not waiting.done():
            waiting.set_result(None)

    def forget(self) -> None:
        self._woken = False

    async def wait(self, at_most: float) -> None:
        """Until :meth:`wake` is called or ``at_most`` seconds have passed."""
        if self._woken:
            self._woken = False
            await asyncio.sleep(0)  # once round the event loop, as a wait would
            return
        loop = asyncio.get_running_loop()
        self._waiting = waiting = loop.create_future()
        timer = loop.call_later(at_most, self.wake)
        try:
            await waiting
        finally:
            timer.cancel()
            self._waiting = None
