"""Turning the signs of a broker that lost our records (``lost.py``) into the daemon's end.

The checks run on the loop's every iteration (high watermarks), on the readiness probe's
metadata (topics) and on restore (group offsets, in ``assignment.py``); the first loss found
is kept in ``_fatal`` and the loop raises it, so nothing more is committed.
"""

from __future__ import annotations

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import IllegalStateError

from ..logs import get_logger
from .base import LOGGER, MonitorBase
from .lost import BrokerLost

log = get_logger(LOGGER)


class LossWatch(MonitorBase):
    """The broker-loss checks; ``_broker_lost`` keeps the first loss for the loop."""

    def _broker_lost(self, exc: BrokerLost) -> None:
        if self._fatal is None:
            log.error("monitor.broker_lost", error=str(exc),
                      action="exiting without committing; restart the monitor against the "
                             "new cluster (topics are recreated at start)")
            self._fatal = exc

    def _check_highwaters(self, consumer: AIOKafkaConsumer) -> None:
        for p, part in self._parts.items():
            tp = TopicPartition(self.kafka.ticks_topic, p)
            try:
                self._losses.check_highwater(tp.topic, p, consumer.highwater(tp),
                                             part.next_offset)
            except IllegalStateError:
                continue  # being revoked right now
            except BrokerLost as exc:
                self._broker_lost(exc)
                return

    def _check_topics(self, topics: set[str]) -> None:
        """From the readiness probe's metadata: our topics must still exist."""
        k = self.kafka
        missing = sorted({k.ticks_topic, k.state_topic} - topics)
        if missing and self._parts:
            self._broker_lost(BrokerLost(
                f"the broker lost topics {missing}: they no longer exist on it"))
