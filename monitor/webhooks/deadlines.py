"""One timer for many concurrent awaits that share one timeout: the sends' bound.

Every webhook POST is bounded by ``delivery.timeout_seconds``. ``asyncio.timeout`` does
that with a timer handle per send (made, pushed on the loop's heap, cancelled, its
``Timeout`` object entered and left): ~11 µs of CPU per send on the benchmark machine, a
few percent of a busy worker's whole cost per delivery. All sends share one duration, so
their deadlines come in the order the sends start: a FIFO of guards and ONE loop timer,
set for the oldest guard still running, do the same job. When a guard's deadline passes
its task is cancelled, and the cancellation is turned into ``TimeoutError`` exactly as
``asyncio.timeout`` does it (``Task.uncancel``: a cancel from anyone else stays a
cancel). A send that ends just as its deadline passes is a timeout here as there: the
task was cancelled first.
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType
from typing import Any

__all__ = ["SharedTimeout"]


class _Guard:
    """One bounded await (see :meth:`SharedTimeout.guard`)."""

    __slots__ = ("_cancelling", "_owner", "_task", "deadline", "done", "expired")

    def __init__(self, owner: SharedTimeout, task: asyncio.Task[object], deadline: float
                 ) -> None:
        self._owner = owner
        self._task = task
        self._cancelling = task.cancelling()
        self.deadline = deadline
        self.done = False
        self.expired = False

    async def __aenter__(self) -> _Guard:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        self.done = True
        self._owner._drop_done()
        if self.expired and self._task.uncancel() <= self._cancelling \
                and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc

    def expire(self) -> None:
        """Its deadline passed: cancel its task (done: the timer has dropped it)."""
        self.done = self.expired = True
        self._task.cancel()


class SharedTimeout:
    """``async with shared.guard(): ...`` bounds the block by ``seconds``, as
    ``async with asyncio.timeout(seconds)`` would (``TimeoutError`` when it runs out)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._guards: deque[_Guard] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    def guard(self, task: asyncio.Task[Any] | None = None) -> _Guard:
        """A guard for the current task, its deadline ``seconds`` from now. A caller that
        knows its task passes it: on CPython 3.11 ``asyncio.current_task()`` is Python
        code around a ``get_running_loop()`` that calls ``getpid()``, ~0.4 µs of every
        send in the delivery worker's loop (``benchmarks/bench_send_stamps.py``)."""
        if task is None:
            task = asyncio.current_task()
            if task is None:
                raise RuntimeError("SharedTimeout.guard() must be used inside a task")
        loop = task.get_loop()
        if loop is not self._loop:
            # A new event loop (a second asyncio.run with the same sender): guards and
            # the timer of the old one can never run again.
            self._guards.clear()
            self._timer = None
            self._loop = loop
        guard = _Guard(self, task, loop.time() + self.seconds)
        self._guards.append(guard)
        if self._timer is None:
            self._arm(loop, guard.deadline)
        return guard

    @property
    def pending(self) -> int:
        """Guards not yet dropped (running, or finished behind an older running one)."""
        return len(self._guards)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        self._timer_at = when
        self._timer = loop.call_at(when, self._fire, loop)

    def _drop_done(self) -> None:
        guards = self._guards
        while guards and guards[0].done:
            guards.popleft()
        if not guards and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        """The timer: expire every running guard whose deadline has passed, then wait
        for the oldest one left (deadlines never decrease along the queue)."""
        self._timer = None
        # The loop runs a timer up to its clock's resolution early: the deadline it was
        # set for counts as passed.
        now = max(loop.time(), self._timer_at)
        guards = self._guards
        while guards and (guards[0].done or guards[0].deadline <= now):
            guard = guards.popleft()
            if not guard.done:
                guard.expire()
        if guards:
            self._arm(loop, guards[0].deadline)
