"""The delivery worker's loop wakes at the event loop's next step when work comes.

A new event's claim waits for the worker's loop to notice its ``wake``; every step of
the event loop in between lets other callbacks (a busy neighbour's answers) run first.
These check :mod:`monitor.webhooks.wakeup` step by step, and a real dispatcher that
never polls (an hour's poll interval): only its flags and its stop can reach it.
"""

from __future__ import annotations

import asyncio

from monitor.config import DeliveryConfig
from monitor.storage import Database
from monitor.storage.deliveries import DeliveryStore
from monitor.webhooks.dispatcher import DeliveryAttempts, Dispatcher
from monitor.webhooks.secrets import SecretBox
from monitor.webhooks.sender import Sender
from monitor.webhooks.wakeup import Flag, Wakeup
from tests.webhook_support import (
    ENCRYPTION_KEY,
    queue_for_new_subscription,
    receiver,
    wait_until,
)


async def test_a_set_flag_resumes_the_waiting_loop_at_the_next_step() -> None:
    wakeup = Wakeup()
    flag = Flag(wakeup.wake)
    woke: list[bool] = []

    async def loop() -> None:
        await wakeup.wait(3600)
        woke.append(flag.is_set())

    task = asyncio.create_task(loop())
    try:
        await asyncio.sleep(0)  # the task is waiting now
        assert not woke
        flag.set()
        await asyncio.sleep(0)  # one step of the event loop
        assert woke == [True]
    finally:
        task.cancel()


async def test_a_flag_is_still_an_event() -> None:
    wakeup = Wakeup()
    flag = Flag(wakeup.wake)
    waiter = asyncio.create_task(flag.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    flag.set()  # nothing waits on the wakeup: only the event's own waiter resumes
    await asyncio.wait_for(waiter, 5)
    flag.clear()
    assert not flag.is_set()


async def test_a_wake_while_nothing_waits_is_kept_until_forgotten() -> None:
    wakeup = Wakeup()
    wakeup.wake()  # the loop in a cycle: its next wait returns at once
    await asyncio.wait_for(wakeup.wait(3600), 5)
    wakeup.wake()
    wakeup.forget()  # the loop read its flags: nothing left to wake it for
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(wakeup.wait(0.05), 5)
    assert loop.time() - started >= 0.04  # the poll's timeout, the timer's resolution aside


async def steps_until(woke: list[bool], most: int) -> int:
    """Event-loop steps (``sleep(0)``) until ``woke`` holds a wake, at most ``most``."""
    for step in range(1, most + 1):
        await asyncio.sleep(0)
        if woke:
            return step
    return -1


async def test_a_flag_with_steps_wakes_that_many_steps_later_if_still_set() -> None:
    woke: list[bool] = []
    flag = Flag(lambda: woke.append(True), steps=2)
    flag.set()
    flag.set()  # one countdown for both
    assert await steps_until(woke, 10) == 2
    for _ in range(5):
        await asyncio.sleep(0)
    assert woke == [True]  # one countdown, one wake
    woke.clear()
    flag.clear()
    flag.set()
    flag.clear()  # the loop took the work up before the countdown ended
    assert await steps_until(woke, 5) == -1


async def test_a_worker_that_never_polls_is_reached_by_wake_and_by_stop(
        webhook_db: Database) -> None:
    config = DeliveryConfig(allow_loopback=True, secret_encryption_key=ENCRYPTION_KEY,
                            poll_interval_seconds=3600.0)
    box = SecretBox.from_config(config)
    async with receiver() as rec:
        sender = Sender(config)
        dispatcher = Dispatcher(DeliveryAttempts(DeliveryStore(webhook_db), sender, box,
                                                 config))
        stop = asyncio.Event()
        runner = asyncio.create_task(dispatcher.run(stop))
        try:
            async def waiting() -> bool:
                return dispatcher.waiting

            await wait_until(waiting, what="the worker's first (empty) cycle")
            # Recorded while the worker waits for the hour: only the wake finds them.
            await queue_for_new_subscription(webhook_db, box, rec.url, 3)
            dispatcher.wake.set()
            await rec.wait_requests(3)
            stop.set()
            await asyncio.wait_for(runner, 15)  # not the hour's poll
        finally:
            stop.set()
            await asyncio.gather(runner, return_exceptions=True)
            await sender.close()
    assert len(rec.received) == 3
    assert await webhook_db.fetchval(
        "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'success'") == 3
