"""What the monitor daemon and the vault daemon share around their loops.

Both consume a partition group and restore state when partitions are assigned, answer
``/readyz`` through :class:`Readiness`, call the broker under one :class:`BrokerCalls`
policy, count what they did for the line they log when they stop, and leave the same way:
the readiness probe cancelled, the check unregistered, the assigned-partitions gauge at 0,
every started client closed within a bound. Written once, so the two cannot drift apart;
each daemon keeps its own loop, outputs and checkpoints.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer

from .. import health, metrics
from ..config import Config
from ..kafka.closing import CLOSE_SECONDS, Stoppable, close_all
from .brokercalls import BrokerCalls
from .readiness import Readiness


@dataclass(slots=True)
class ConsumerStats:
    """The counts every consuming daemon keeps (each adds its own): records read, dead
    letters written, rating records published, checkpoints taken, and records skipped on
    restore because a restored state already covered them."""

    records: int = 0
    dead_letters: int = 0
    ratings: int = 0
    checkpoints: int = 0
    skipped_restored: int = 0


def summary(stats: ConsumerStats, names: Iterable[str]) -> dict[str, int]:
    """The stopped line's figures: the named counts, in the order named."""
    return {name: getattr(stats, name) for name in names}


class ConsumerDaemon:
    """The attributes of a consuming daemon's lifecycle, set up once, and its way out.

    ``check_name`` is the ``/readyz`` check it registers; a subclass says what it holds
    (:meth:`_describe`, for the readiness message).
    """

    def __init__(self, config: Config, check_name: str) -> None:
        self.config = config
        self.kafka = config.kafka
        self.check_name = check_name
        self._lock = asyncio.Lock()
        self._consumer: AIOKafkaConsumer | None = None
        self._stop = asyncio.Event()
        self.readiness = Readiness(self.kafka.ready_stall_seconds,
                                   lambda: self._stop.is_set(), self._describe)
        self._broker = BrokerCalls(self.kafka, self.readiness, lambda: self._stop.is_set(),
                                   lambda: self._consumer is not None)
        self._retry = self._broker.retry
        #: Set once this instance joined its group and restored its partitions' state.
        self.joined = self.readiness.joined
        #: Set by a rebalance callback that could not restore state (or, in the monitor,
        #: when the broker lost what it had acknowledged); the loop raises it.
        self._fatal: BaseException | None = None

    def _describe(self) -> str:
        raise NotImplementedError

    async def _leave(self, label: str, probe: asyncio.Task[None] | None,
                     clients: Iterable[tuple[str, Stoppable | None]],
                     seconds: float = CLOSE_SECONDS) -> None:
        """The end of ``run``, however it ended. ``label`` is the daemon's metric label
        and log prefix (``<label>.close_failed``)."""
        if probe:
            probe.cancel()
        health.unregister_check(self.check_name)
        metrics.ASSIGNED_PARTITIONS.labels(label).set(0)
        await close_all(clients, f"{label}.close_failed", seconds)
