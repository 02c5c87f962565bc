"""Starting a consumer that joins its group at start, without making SIGTERM wait for it.

A consumer given its topics when it is made (the delivery worker's, the store writer's)
waits inside aiokafka's ``start()`` until the group hands it partitions. After a member
of the group died (``kill -9``, an OOM kill, a lost node), that is the dead member's
session timeout plus a rebalance: 18 s with the default 10 s session on the test broker.
A stop asked for meanwhile waited for all of it, past the grace period of many
supervisors (Kubernetes gives 30 s by default, then SIGKILL: mid-send for the worker).
"""

from __future__ import annotations

import asyncio
from typing import Protocol


class Startable(Protocol):
    """A Kafka client's ``start()``: what :func:`start_unless_stopped` needs of it."""

    async def start(self) -> None: ...


async def start_unless_stopped(consumer: Startable, stop: asyncio.Event) -> bool:
    """Start ``consumer`` unless ``stop`` is set first. True: started (joined); False:
    stopped before that, the start cancelled. Either way the caller still stops the
    consumer (``close_bounded(consumer.stop(), ...)``). An error of the start is raised."""
    if stop.is_set():
        return False
    starting = asyncio.ensure_future(consumer.start())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((starting, stopping), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not starting.done():
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
    if starting.cancelled():
        return False
    starting.result()  # the start's own error, if it failed
    return True


__all__ = ["Startable", "start_unless_stopped"]
