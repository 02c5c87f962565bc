"""Group commit: callers submit one item each and wait; a single flusher writes them in
batches.

The first item submitted while no flush is running is written at once, alone (no added
latency when the worker is idle); items submitted while a flush is in flight wait for it
and then go together in the next one. Batch size therefore follows load by itself: one
write per item when quiet, one write per many items when busy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class GroupCommit(Generic[T, R]):
    def __init__(self, flush: Callable[[Sequence[T]], Awaitable[Sequence[R]]],
                 max_batch: int = 500) -> None:
        self._flush = flush
        self._max_batch = max_batch
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def submit(self, item: T) -> R:
        """Write ``item`` with whatever else is waiting; its result, or the flush's error."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            batch = self._pending[:self._max_batch]
            del self._pending[:self._max_batch]
            try:
                results = await self._flush([item for item, _ in batch])
            except asyncio.CancelledError:
                for _, future in batch + self._pending:
                    future.cancel()
                self._pending.clear()
                raise
            except Exception as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)
