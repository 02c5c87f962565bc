"""The checkpoint: outputs acknowledged, then the due tokens' states, then offsets.

In that order, so a committed offset never runs ahead of the outputs it produced nor of the
state that covers it (see ``ingest.py`` and ``state.py``). Taken every
``checkpoint_interval_seconds``, on revoke and on shutdown. Which tokens' states it writes
and how far each partition's offset may then move is ``coverage.py``: the due ones
(``state_every_ticks``, ``state_max_age_seconds``), every changed one on revoke and
shutdown; the offset up to the partition's first tick not inside a written state.
"""

from __future__ import annotations

import time
from functools import partial

from aiokafka import TopicPartition

from .. import metrics
from .base import MonitorBase
from .clients import commit_unless_fenced
from .publisher import Outgoing
from .state import STATE_VERSION, StateRecord, encode_state


class Checkpoints(MonitorBase):
    """``_checkpoint`` and the fenced-aware ``_commit`` it ends with."""

    async def _checkpoint(self, partitions: list[int], *, everything: bool = False) -> None:
        """Due states (``everything``: every changed token's) -> state topic, acknowledged;
        then commit offsets as far as the written states cover."""
        assert self._out is not None
        if self._fatal is not None:
            return  # the broker lost our records: commit nothing into the new log
        publisher = self._out.publisher
        k = self.kafka
        parts = [self._parts[p] for p in partitions if p in self._parts]
        await publisher.flush()  # every output so far is acknowledged before the states
        now = time.time()
        tick = time.monotonic()  # the clock Uncovered.since is on
        states: list[Outgoing] = []
        chosen: list[list[str]] = []
        for part in parts:
            uncovered = part.uncovered
            keys = (sorted(uncovered.changed_keys()) if everything else
                    uncovered.due(tick, k.state_every_ticks, k.state_max_age_seconds))
            chosen.append(keys)
            for key in keys:
                # Compact: the ticks still held for lateness stay out of the state (their
                # offsets go in instead), so its size does not grow with tick density.
                pending = part.pending_offsets(key)
                record = StateRecord(
                    version=STATE_VERSION, key=key, partition=part.partition,
                    offset=part.state_offset(key),
                    last_event_ts=self._clock.last_event_ts(key),
                    written_at=now, stale=self._clock.is_stale(key),
                    engine_state=part.engine.export_state(key, pending=pending is None),
                    pending_offsets=pending or [],
                )
                states.append(Outgoing(k.state_topic, encode_state(record), key.encode(),
                                       part.partition, None, "state"))
        written = len(states)
        await publisher.send_all(states)  # one record batch per partition
        await publisher.flush()
        for part, keys in zip(parts, chosen, strict=True):
            part.uncovered.written(keys)
        # Never backwards: while a restored partition is read again below its committed
        # offset (compact states' held ticks), the group's offset stays where it was; and
        # never past a tick that no written state holds yet (coverage.py).
        target = {part.partition: part.uncovered.commit_offset(part.next_offset)
                  for part in parts}
        moving = [part for part in parts if target[part.partition] > part.committed or (
            target[part.partition] == part.committed and not part.commit_sent)]
        offsets = {TopicPartition(k.ticks_topic, part.partition): target[part.partition]
                   for part in moving}
        if offsets and await self._commit(offsets):
            for part in moving:
                part.commit_sent = True
            for part in parts:
                part.committed = max(part.committed, target[part.partition])
                # Only offsets the group really took count as "ours" for lost.py.
                self._losses.committed(part.partition, part.committed)
        for part in parts:
            metrics.MONITOR_UNCOMMITTED.labels(str(part.partition)).set(
                max(part.next_offset - part.committed, 0))
        if written or offsets:
            self.stats.checkpoints += 1

    async def _commit(self, offsets: dict[TopicPartition, int]) -> bool:
        """Commit; False when the group had moved on (fenced), True when committed."""
        consumer = self._consumer
        assert consumer is not None
        return await self._retry(
            partial(commit_unless_fenced, consumer, offsets, "monitor.commit_fenced"), "commit")
