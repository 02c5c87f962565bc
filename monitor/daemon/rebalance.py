"""Partition assignment: the listener aiokafka calls, and where a partition resumes.

aiokafka uses the eager protocol: on every rebalance all partitions are revoked (the
daemon checkpoints them and sets them aside) and the new set assigned (the daemon takes
back, without reading anything, a partition set aside whose committed offset is still where
it stopped, and restores every other one from the state topic). Both callbacks take the
daemon's batch lock, so a revocation waits for the batch in flight to be published,
checkpointed and committed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiokafka import ConsumerRebalanceListener, TopicPartition

from ..logs import get_logger
from .retry import Aborted

log = get_logger(__name__)

PartitionsCallback = Callable[[list[TopicPartition]], Awaitable[None]]


class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, on_revoked: PartitionsCallback, on_assigned: PartitionsCallback) -> None:
        self._on_revoked = on_revoked
        self._on_assigned = on_assigned

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        await self._on_revoked(list(revoked))

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        await self._on_assigned(list(assigned))


async def restore_or_failure(restore: PartitionsCallback, assigned: list[TopicPartition],
                             failed_event: str) -> BaseException | None:
    """Run a daemon's restore of its new partitions; the exception that made it fail, if any.

    aiokafka would log a failing callback and carry on, fetching partitions the daemon
    holds no engine for; the daemon keeps the failure instead, and its loop raises it (the
    daemon stops, a restart retries). ``Aborted`` is no failure: it is shutting down anyway.
    """
    try:
        await restore(assigned)
    except Aborted:
        return None
    except Exception as exc:
        log.exception(failed_event)
        return exc
    return None


async def start_offset(consumer: Any, tp: TopicPartition) -> int:
    """Where the group resumes ``tp``: its committed offset, else the beginning.

    Not ``consumer.position()``: the fetcher starts as soon as the partition is assigned,
    so by the time the assignment callback runs ``getmany`` may already have handed out
    (and moved the position past) records this instance has not processed yet.
    """
    committed = await consumer.committed(tp)
    beginning = (await consumer.beginning_offsets([tp]))[tp]
    if committed is None or committed < beginning:  # auto_offset_reset="earliest"
        return int(beginning)
    return int(committed)
