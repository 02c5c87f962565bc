"""The vault daemon's state and what it does between batches: write each changed vault's
state, then commit (a checkpoint), and checkpoint, restore or drop partitions as the group
rebalances.

The layer :class:`~monitor.vaults.daemon.VaultDaemon` extends (as the monitor daemon is
built in layers, ``monitor/daemon/base.py``): the attributes every part reads are set up
here, and everything here runs under ``_lock``. States are written and acknowledged before
offsets are committed, so a crash re-produces at most one checkpoint interval of records,
byte for byte.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass
from functools import partial

from aiokafka import AIOKafkaConsumer, TopicPartition

from .. import metrics
from ..config import Config
from ..daemon.clients import commit_unless_fenced
from ..daemon.lifecycle import ConsumerDaemon, ConsumerStats
from ..daemon.publisher import Publisher
from ..daemon.rebalance import restore_or_failure, start_offset
from ..daemon.state import STATE_VERSION, StateRecord, encode_state, read_states
from ..gcpolicy import service_started
from ..kafka.topics import make_reader
from ..logs import get_logger
from .depeg_link import DepegTable
from .partitions import VaultPartition

#: Every layer logs as the one module the daemon was before its split.
LOGGER = "monitor.vaults.daemon"
log = get_logger(LOGGER)
#: The daemon's metric label (and log prefix).
CONSUMER = "vaults"


@dataclass(slots=True)
class VaultDaemonStats(ConsumerStats):
    facts: int = 0
    depeg_changes: int = 0
    restored_vaults: int = 0


class VaultCheckpoints(ConsumerDaemon):
    """The vault daemon's partitions, depeg table, publisher and counts; its checkpoints
    and rebalance callbacks."""

    def __init__(self, config: Config, check_name: str = "vaults") -> None:
        super().__init__(config, check_name)
        self.vaults = config.vaults
        self.depeg = DepegTable()
        self.stats = VaultDaemonStats()
        self._parts: dict[int, VaultPartition] = {}
        self._follower: AIOKafkaConsumer | None = None
        self._publisher: Publisher | None = None
        self._dlq_reasons: Counter[str] = Counter()

    # -- checkpoints --------------------------------------------------------------------
    async def _checkpoint(self, partitions: list[int]) -> None:
        """States of changed vaults -> state topic (acknowledged), then commit offsets."""
        publisher = self._publisher
        assert publisher is not None
        parts = [self._parts[p] for p in partitions if p in self._parts]
        await publisher.flush()
        now = time.time()
        written = 0
        for part in parts:
            for key in sorted(part.dirty):
                state = part.engine.state(key)
                if state is None:
                    continue
                record = StateRecord(
                    version=STATE_VERSION, key=key, partition=part.partition,
                    offset=part.next_offset,
                    last_event_ts=state.clock if math.isfinite(state.clock) else None,
                    written_at=now, stale=False, engine_state=part.engine.export_state(key))
                await publisher.send(self.vaults.state_topic, encode_state(record),
                                     key=key.encode(), partition=part.partition, kind="state")
                written += 1
        await publisher.flush()
        for part in parts:
            part.dirty.clear()
        offsets = {TopicPartition(self.vaults.facts_topic, part.partition): part.next_offset
                   for part in parts if part.next_offset != part.committed}
        if offsets:
            await self._commit(offsets)
            for part in parts:
                part.committed = part.next_offset
        if written or offsets:
            self.stats.checkpoints += 1
        self._set_gauges()

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        consumer = self._consumer
        assert consumer is not None
        await self._retry(
            partial(commit_unless_fenced, consumer, offsets, "vaults.commit_fenced"), "commit")

    def _set_gauges(self) -> None:
        tiers: Counter[str] = Counter()
        verdicts: Counter[str] = Counter()
        attention = 0
        for part in self._parts.values():
            for key in part.engine.keys():
                state = part.engine.state(key)
                if state is not None and state.last is not None:
                    tiers[state.last.tier] += 1
                    verdicts[state.last.verdict] += 1
                    attention += state.last.attention
        metrics.set_vault_counts(dict(tiers), dict(verdicts), attention)

    # -- rebalancing ------------------------------------------------------------------
    async def on_revoked(self, revoked: list[TopicPartition]) -> None:
        ours = [tp.partition for tp in revoked if tp.topic == self.vaults.facts_topic]
        async with self._lock:
            try:
                await self._checkpoint(ours)
            except Exception as exc:
                log.error("vaults.revoke_checkpoint_failed",
                          error=f"{type(exc).__name__}: {exc}"[:300])
            finally:
                for p in ours:
                    self._parts.pop(p, None)
                    metrics.CONSUMER_LAG.labels(CONSUMER, str(p)).set(0)
                metrics.ASSIGNED_PARTITIONS.labels(CONSUMER).set(len(self._parts))
        if ours:
            log.info("vaults.partitions_revoked", partitions=sorted(ours))

    async def on_assigned(self, assigned: list[TopicPartition]) -> None:
        failure = await restore_or_failure(self._restore, assigned, "vaults.restore_failed")
        if failure is not None:
            self._fatal = failure

    async def _restore(self, assigned: list[TopicPartition]) -> None:
        consumer = self._consumer
        assert consumer is not None
        topic = self.vaults.facts_topic
        async with self._lock:
            new = sorted(tp.partition for tp in assigned
                         if tp.topic == topic and tp.partition not in self._parts)
            states = await self._retry(
                lambda: read_states(self._state_reader, self.vaults.state_topic, new),
                "restore_state")
            restored = 0
            for p in new:
                position = await self._retry(
                    partial(start_offset, consumer, TopicPartition(topic, p)), "start_offset")
                self._parts[p] = VaultPartition.restore(p, self.vaults, self.depeg, position,
                                                        states[p])
                restored += len(states[p])
            self.stats.restored_vaults += restored
            if not self.joined.is_set():  # started: imports done, first state restored
                service_started("vaults", self.config.gc)
            self.joined.set()
            metrics.ASSIGNED_PARTITIONS.labels(CONSUMER).set(len(self._parts))
        log.info("vaults.partitions_assigned", partitions=new, restored_vaults=restored,
                 positions={p: self._parts[p].next_offset for p in new})

    def _state_reader(self) -> AIOKafkaConsumer:
        k = self.kafka
        return make_reader(k, f"{k.client_id}-vaults-state-reader")

    # -- helpers ------------------------------------------------------------------------
    def _sorted_parts(self) -> list[VaultPartition]:
        return [self._parts[p] for p in sorted(self._parts)]

    def _describe(self) -> str:
        vaults = sum(len(part.engine) for part in self._parts.values())
        return f"{len(self._parts)} partitions, {vaults} vaults, {len(self.depeg)} depeg tokens"
