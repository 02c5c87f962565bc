"""Stopping a Kafka client without letting the stop itself end the caller.

aiokafka's ``stop()`` can wait for ever on a broker that is gone, and a consumer's can
raise ``CancelledError`` of its own: its fetcher cancels its pending requests and awaits
them, so one caught in its retry sleep comes out of ``stop()`` although nobody cancelled
the caller. Every client this service starts, long-lived or read-once, is stopped here, so
the error that ended its work (or its result) is what the caller sees.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import Protocol

from ..logs import get_logger

log = get_logger(__name__)

#: How long stopping one client may take (a broker that is gone would otherwise keep a
#: stop waiting for ever).
CLOSE_SECONDS = 5.0


async def close_bounded(closing: Awaitable[None], what: str, event: str,
                        seconds: float = CLOSE_SECONDS) -> None:
    """Await ``closing`` (a client's ``stop()``) for at most ``seconds``; a failure is
    logged as ``event`` (``<component>.close_failed``) with ``what`` and never raised,
    except a real cancellation of the calling task, which still ends it."""
    try:
        await asyncio.wait_for(closing, seconds)
    except Exception as exc:  # TimeoutError, KafkaError, OSError, or a bug in the client:
        # the caller is cleaning up, and its own error or result is the one to keep
        log.warning(event, client=what, error=type(exc).__name__)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        log.warning(event, client=what, error="CancelledError")


class Stoppable(Protocol):
    """A Kafka client: what :func:`close_all` needs of it."""

    def stop(self) -> Awaitable[None]: ...


async def close_all(clients: Iterable[tuple[str, Stoppable | None]], event: str,
                    seconds: float = CLOSE_SECONDS) -> None:
    """:func:`close_bounded` for each ``(what, client)`` in order, skipping the clients
    that were never started (None): the end of a service's ``run`` however it ended."""
    for what, client in clients:
        if client is not None:
            await close_bounded(client.stop(), what, event, seconds)
