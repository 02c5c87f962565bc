"""``start_unless_stopped``: a start that may wait long is raced against the stop event.
(The real consumers, behind a dead group member: tests/consumers/test_stop_while_joining.py.)"""

from __future__ import annotations

import asyncio

import pytest

from monitor.kafka.joining import start_unless_stopped


class Start:
    """A start that ends when ``done`` is set, or fails with ``error``."""

    def __init__(self, error: Exception | None = None) -> None:
        self.done = asyncio.Event()
        self.error = error
        self.began = asyncio.Event()
        self.cancelled = False

    async def start(self) -> None:
        self.began.set()
        try:
            await self.done.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        if self.error is not None:
            raise self.error


async def test_a_start_that_finishes_first_is_started() -> None:
    client, stop = Start(), asyncio.Event()
    client.done.set()
    assert await start_unless_stopped(client, stop) is True
    assert not client.cancelled


async def test_a_stop_while_starting_cancels_the_start() -> None:
    client, stop = Start(), asyncio.Event()
    racing = asyncio.create_task(start_unless_stopped(client, stop))
    await client.began.wait()  # the start is under way
    stop.set()
    assert await racing is False
    assert client.cancelled


async def test_a_stop_before_the_start_never_starts_it() -> None:
    client, stop = Start(), asyncio.Event()
    stop.set()
    assert await start_unless_stopped(client, stop) is False
    assert not client.began.is_set()


async def test_the_starts_own_error_is_raised() -> None:
    client, stop = Start(ConnectionError("no broker")), asyncio.Event()
    client.done.set()
    with pytest.raises(ConnectionError, match="no broker"):
        await start_unless_stopped(client, stop)


async def test_cancelling_the_caller_cancels_the_start_too() -> None:
    client, stop = Start(), asyncio.Event()
    racing = asyncio.create_task(start_unless_stopped(client, stop))
    await client.began.wait()
    racing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await racing
    assert client.cancelled
