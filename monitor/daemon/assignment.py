"""Partitions revoked and assigned: checkpoint and set aside, then take back or restore.

The listener and where a partition resumes are in ``rebalance.py`` (shared with the vault
daemon); this is what the monitor does with them: a partition that comes back untouched is
resumed as it was, any other is restored from the state topic and, where its compact states
left held ticks out, sought back to read them again.
"""

from __future__ import annotations

from functools import partial

from aiokafka import AIOKafkaConsumer, TopicPartition

from .. import metrics
from ..gcpolicy import service_started
from ..kafka.topics import make_reader
from ..logs import get_logger
from .base import LOGGER
from .checkpoint import Checkpoints
from .losswatch import LossWatch
from .lost import BrokerLost
from .partitions import PartitionState
from .rebalance import restore_or_failure, start_offset
from .state import read_states

log = get_logger(LOGGER)


class Assignment(Checkpoints, LossWatch):
    """The rebalance callbacks (``on_revoked``, ``on_assigned``) and the restore."""

    async def on_revoked(self, revoked: list[TopicPartition]) -> None:
        """Checkpoint and set aside every revoked partition.

        aiokafka's eager protocol revokes everything on every rebalance; most partitions
        come straight back. They are kept aside (not processed: ``_process`` only sees
        ``_parts``) so ``on_assigned`` can resume them without reading the state topic.
        """
        ours = [tp.partition for tp in revoked if tp.topic == self.kafka.ticks_topic]
        async with self._lock:  # waits for the batch in flight
            try:
                # Every changed token: the next owner starts exactly here.
                await self._checkpoint(ours, everything=True)
            except Exception as exc:
                # Safe: the next owner resumes from older states and the committed
                # offset, re-producing the same outputs.
                log.error("monitor.revoke_checkpoint_failed",
                          error=f"{type(exc).__name__}: {exc}"[:300])
            finally:
                for p in ours:
                    part = self._parts.pop(p, None)
                    if part is not None:
                        self._set_aside[p] = part
                    metrics.CONSUMER_LAG.labels("monitor", str(p)).set(0)
                    metrics.MONITOR_UNCOMMITTED.labels(str(p)).set(0)
                metrics.ASSIGNED_PARTITIONS.labels("monitor").set(len(self._parts))
        if ours:
            log.info("monitor.partitions_revoked", partitions=sorted(ours))

    async def on_assigned(self, assigned: list[TopicPartition]) -> None:
        failure = await restore_or_failure(self._restore, assigned, "monitor.restore_failed")
        if failure is not None:
            self._fatal = failure

    async def _restore(self, assigned: list[TopicPartition]) -> None:
        k = self.kafka
        consumer = self._consumer
        assert consumer is not None
        async with self._lock:
            mine = sorted(tp.partition for tp in assigned if tp.topic == k.ticks_topic)
            positions: dict[int, int] = {}
            for p in mine:
                if p in self._parts:
                    continue
                tp = TopicPartition(k.ticks_topic, p)
                positions[p] = await self._retry(partial(start_offset, consumer, tp),
                                                 "start_offset")
            try:
                for p, position in positions.items():
                    self._losses.check_group_offset(k.ticks_topic, p, position)
            except BrokerLost as exc:
                self._broker_lost(exc)
                return
            kept = self._take_back(positions)
            new = [p for p in positions if p not in kept]
            states = await self._retry(
                lambda: read_states(self._state_reader, k.state_topic, new), "restore_state")
            restored = 0
            reread: dict[int, int] = {}
            for p in new:
                position = positions[p]
                part = PartitionState.restore(p, self.config.model, position, states[p],
                                              self._spread_gated)
                part.committed = position
                for key, state in states[p].items():
                    self._clock.restored(key, state.last_event_ts, p)
                restored += len(states[p])
                self._parts[p] = part
                if part.next_offset < position:
                    # Compact states left held ticks out: read them again. (aiokafka drops
                    # what it fetched from the committed offset meanwhile; a batch already
                    # handed out is dropped by _process, see _seeked.)
                    self._seek(p, part.next_offset)
                    reread[p] = position - part.next_offset
            self.stats.restored_tokens += restored
            if not self.joined.is_set():  # started: imports done, first state restored
                service_started("monitor", self.config.gc)
            self.joined.set()
            metrics.ASSIGNED_PARTITIONS.labels("monitor").set(len(self._parts))
        log.info("monitor.partitions_assigned", partitions=mine, restored_partitions=new,
                 kept_partitions=kept, restored_tokens=restored, reread_records=reread,
                 positions={p: self._parts[p].next_offset for p in mine if p in self._parts})

    def _seek(self, partition: int, offset: int) -> None:
        assert self._consumer is not None
        self._consumer.seek(TopicPartition(self.kafka.ticks_topic, partition), offset)
        self._seeks += 1
        self._seeked[partition] = self._seeks

    def _take_back(self, positions: dict[int, int]) -> list[int]:
        """Partitions set aside at revocation that came back untouched: resumed as they
        are. Untouched means the group's committed offset is exactly where this instance
        stopped (nobody else committed progress in between, and our final checkpoint
        succeeded); anything else is restored from the state topic. Partitions set aside
        and not assigned again are dropped."""
        kept = []
        for p, part in self._set_aside.items():
            if positions.get(p) == part.next_offset == part.committed:
                self._parts[p] = part
                kept.append(p)
            else:
                self._clock.forget(list(part.engine.keys()))
        self._set_aside.clear()
        return sorted(kept)

    def _state_reader(self) -> AIOKafkaConsumer:
        k = self.kafka
        return make_reader(k, f"{k.client_id}-state-reader")
