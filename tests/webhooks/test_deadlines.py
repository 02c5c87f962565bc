"""SharedTimeout bounds each guarded block as ``asyncio.timeout`` would, with one timer.

The reference is asyncio's own timeout: the same blocks under each must end the same way
(finished, TimeoutError, or an outside cancel that stays a cancel), and a block that
timed out must have run for at least the duration on the loop's clock.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import pytest

from monitor.webhooks.deadlines import SharedTimeout

SECONDS = 0.05


async def _block(finish: asyncio.Event) -> str:
    await finish.wait()
    return "finished"


async def _outcome(guard: Callable[[], Any], finish: asyncio.Event) -> tuple[str, float]:
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        async with guard():
            result = await _block(finish)
    except TimeoutError:
        result = "timeout"
    # The task is usable afterwards: no cancel left pending on it.
    await asyncio.sleep(0)
    return result, loop.time() - started


async def test_blocks_end_as_under_asyncio_timeout() -> None:
    """Twenty blocks started at staggered times, some released before the deadline and
    some never: each ends as it does under ``asyncio.timeout`` in a run of its own."""
    rng = random.Random(7)
    hangs = [rng.random() < 0.5 for _ in range(20)]

    async def run(make_guard: Callable[[], Any]) -> list[str]:
        events = [asyncio.Event() for _ in hangs]
        tasks = []
        for event, _ in zip(events, hangs, strict=True):
            tasks.append(asyncio.create_task(_outcome(make_guard, event)))
            await asyncio.sleep(0)  # started one after another: deadlines in order
        for event, hang in zip(events, hangs, strict=True):
            if not hang:
                event.set()
        async with asyncio.timeout(30):  # a guard that never fires fails, not hangs
            results = await asyncio.gather(*tasks)
        for name, took in results:
            if name == "timeout":
                assert took >= SECONDS
        return [name for name, _ in results]

    shared = SharedTimeout(SECONDS)
    ours = await run(shared.guard)
    # The guard given its task by the caller (the delivery worker's sender slots do).
    given = await run(lambda: shared.guard(asyncio.current_task()))
    reference = await run(lambda: asyncio.timeout(SECONDS))
    assert ours == given == reference == ["timeout" if h else "finished" for h in hangs]
    assert shared.pending == 0


async def test_an_outside_cancel_stays_a_cancel() -> None:
    shared = SharedTimeout(60.0)
    entered = asyncio.Event()

    async def guarded() -> None:
        async with shared.guard():
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(guarded())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert shared.pending == 0


async def test_an_outer_asyncio_timeout_still_wins() -> None:
    """Nested in a shorter ``asyncio.timeout``: that one's TimeoutError, from its block."""
    shared = SharedTimeout(60.0)
    outer_fired = False
    try:
        async with asyncio.timeout(SECONDS) as outer:
            async with shared.guard():
                await asyncio.Event().wait()
    except TimeoutError:
        outer_fired = outer.expired()
    assert outer_fired
    assert shared.pending == 0


async def test_a_finished_block_behind_a_running_one_is_dropped_with_it() -> None:
    """Guards end in any order; the queue keeps only what an older running guard holds."""
    shared = SharedTimeout(SECONDS)
    first, second = asyncio.Event(), asyncio.Event()
    a = asyncio.create_task(_outcome(shared.guard, first))
    await asyncio.sleep(0)
    b = asyncio.create_task(_outcome(shared.guard, second))
    await asyncio.sleep(0)
    second.set()
    assert (await b)[0] == "finished"
    assert shared.pending == 2  # b waits behind a, still running
    async with asyncio.timeout(30):
        assert (await a)[0] == "timeout"
    assert shared.pending == 0
    # The timer is gone with the last guard: a later block starts a new one.
    async with asyncio.timeout(30):
        result, took = await _outcome(shared.guard, asyncio.Event())
    assert result == "timeout" and took >= SECONDS


def test_a_second_event_loop_gets_its_own_timer() -> None:
    """A block abandoned with its loop (its task never resumed) must not keep a later
    loop's blocks from timing out."""
    shared = SharedTimeout(SECONDS)

    async def abandon() -> None:
        async def stuck() -> None:
            async with shared.guard():
                await asyncio.Event().wait()

        asyncio.get_running_loop().create_task(stuck())
        await asyncio.sleep(0)  # entered; the loop then ends with it still inside

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(abandon())
    finally:
        loop.close()

    async def later() -> tuple[str, float]:
        async with asyncio.timeout(30):
            return await _outcome(shared.guard, asyncio.Event())

    result, took = asyncio.run(later())
    assert result == "timeout" and took >= SECONDS
