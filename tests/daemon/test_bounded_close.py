"""Closing the daemon's Kafka clients after the loop ended: a client whose ``stop()``
raises ``CancelledError`` of its own (aiokafka's fetcher awaits the requests it just
cancelled) must not turn the daemon's exit into a cancellation, while a real cancel of
the closing task still ends it."""

from __future__ import annotations

import asyncio

import pytest

from monitor.kafka.closing import close_bounded


async def _stop_that_raises_cancelled() -> None:
    inner = asyncio.create_task(asyncio.sleep(3600))
    await asyncio.sleep(0)
    inner.cancel()
    await inner  # what aiokafka's Fetcher.close() does with its pending fetch requests


async def test_a_client_stop_raising_cancelled_error_is_a_failed_close() -> None:
    # Returns (so the daemon re-raises what ended its loop) instead of propagating.
    await close_bounded(_stop_that_raises_cancelled(), "consumer_stop", "test.close_failed")
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_a_real_cancel_of_the_closing_task_still_ends_it() -> None:
    started = asyncio.Event()

    async def slow_stop() -> None:
        started.set()
        await asyncio.sleep(3600)

    closing = asyncio.create_task(close_bounded(slow_stop(), "producer_stop",
                                                "test.close_failed"))
    await started.wait()
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing


async def test_a_stop_that_never_ends_is_abandoned_after_the_bound() -> None:
    # A broker that is gone keeps aiokafka's stop() waiting; the caller must go on.
    abandoned = asyncio.Event()

    async def hanging_stop() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            abandoned.set()

    await close_bounded(hanging_stop(), "reader_stop", "test.close_failed", seconds=0.05)
    assert abandoned.is_set()


async def test_any_other_error_of_a_stop_is_logged_not_raised() -> None:
    async def broken_stop() -> None:
        raise RuntimeError("connection table corrupted")

    await close_bounded(broken_stop(), "producer_stop", "test.close_failed")
