"""Tokens whose written states cover different offsets when the process dies.

A checkpoint writes a token's state only when it is due (``kafka.state_every_ticks``,
``state_max_age_seconds``; ``monitor/daemon/coverage.py``), so at a kill -9 each token's
newest state stops at its own offset, and the group's committed offset at the first tick
no state holds. Here every token is due every 8 ticks (never by age): kill -9 once a
first part of the input is processed, restart, SIGTERM after a second part, restart for
the rest; every published rating and tier change is compared byte for byte with
``depeg-monitor replay`` of the same files (the fault matrix's input plus one quiet
token), and after the SIGTERM nothing is published twice (a clean stop writes every
changed token).

The precondition ("at the kill, some token's state is past its partition's committed
offset, another's is not") is asserted, and holds whatever the batches are: a quiet token
shares USDC's partition and ticks 3 times half-way to the kill, so it is never due and the
partition's committed offset stays at its first tick, while USDC (a tick a minute) is
written every 8 ticks past it; and on every partition the token of the lowest uncovered
tick has its state at or below the committed offset. Without the quiet token it held in
about half the runs: USDC's only neighbour ticks every 10 minutes, and whether its newest
state already held its last tick at the kill depended on where the batches ended.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from monitor.config import KafkaConfig
from monitor.daemon.state import read_states
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics, make_reader
from monitor.testing import publish
from monitor.ticks import Tick, replace_tick
from producers.csvout import write_ticks_file

from . import replaytruth
from .faultrun import matrix_files
from .kafkatools import (
    MonitorProcess,
    TopicReader,
    fast_kafka,
    group_caught_up,
    load_ticks,
    partition_of,
    tick_records,
    wait_for,
)

pytestmark = [pytest.mark.broker, pytest.mark.data]

PARTITIONS = 4
#: No spread stage runs here: without this its gates would open after the default timeout
#: and rewrite the gated tokens' states at every check, evening out what the kill finds.
QUIET_GATES = {"DEPEG_SPREAD__GATE_TIMEOUT_SECONDS": "3600"}
#: The share of the input published before the kill -9.
KILL_AT = 0.4
#: ``kafka.state_every_ticks`` here: small, so every other token is due many times.
EVERY_TICKS = 8
#: Ticks of the quiet token: too few to make it due.
QUIET_TICKS = EVERY_TICKS - 5


def quiet_token_file(usdc: list[Tick], out: Path) -> Path:
    """A token on USDC's partition with ``QUIET_TICKS`` ticks, one a minute, half-way to
    the kill (USDC's own ticks under another address)."""
    partition = partition_of(usdc[0].key, PARTITIONS)
    token = next(f"0x{i:040x}" for i in range(1, 1000)
                 if partition_of(f"{usdc[0].chain}:0x{i:040x}", PARTITIONS) == partition)
    middle = int(len(usdc) * KILL_AT / 2)
    ticks = [replace_tick(t, token=token, symbol="QUIET")
             for t in usdc[middle:middle + QUIET_TICKS]]
    path = out / "quiet.csv"
    write_ticks_file(ticks, path)
    return path


async def published(bootstrap: str, kafka: KafkaConfig) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for kind, topic in (("rating", kafka.ratings_topic),
                        ("tier_change", kafka.tier_changes_topic)):
        async with TopicReader(bootstrap, topic) as reader:
            while await reader.poll(1000):
                pass
            out += [(kind, rec.value) for rec in reader.records]
    return out


async def test_kill9_with_tokens_in_different_due_states_then_sigterm(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    files = matrix_files(tmp_path)
    files.append(quiet_token_file(load_ticks(files[0]), tmp_path))
    ticks = load_ticks(*files)
    truth = replaytruth.replay(files, tmp_path)
    # Every token is due after 8 ticks, never by age; a checkpoint after every small batch
    # (fewer ticks than make a token due), so tokens are written at different checkpoints.
    kafka = fast_kafka(broker.bootstrap_servers, batch_max_records=20, partitions=PARTITIONS,
                       session_timeout_ms=4000, heartbeat_interval_ms=800,
                       checkpoint_interval_seconds=0.0, state_every_ticks=EVERY_TICKS,
                       state_max_age_seconds=3600.0)
    bootstrap = broker.bootstrap_servers
    await ensure_topics(kafka)
    # The input in three parts, each published once the previous one is fully processed
    # (every output replay owes for it is out): the faults land at known points.
    cuts = [0, int(len(ticks) * KILL_AT), len(ticks) * 3 // 4, len(ticks)]
    parts = [ticks[cuts[i]:cuts[i + 1]] for i in range(3)]

    async def feed(upto: int, proc: MonitorProcess) -> None:
        await publish(bootstrap, kafka.ticks_topic, tick_records(parts[upto]))
        owed = replaytruth.owed(truth, ticks[:cuts[upto + 1]])

        async def out() -> bool:
            assert proc.proc.poll() is None, proc.log_path.read_text()[-3000:]
            seen = {replaytruth.identity(kind, v) for kind, v in await published(bootstrap,
                                                                                kafka)}
            return owed <= seen
        await wait_for(out, 120, f"every output owed for part {upto + 1}")

    a = MonitorProcess(kafka, tmp_path / "a.log", extra_env=QUIET_GATES)
    await feed(0, a)
    a.kill9()
    a.stop()
    # The precondition: when it died, some token's newest state was past the committed
    # offset of its partition (the restore must skip its ticks below it: USDC's, past the
    # quiet token's first tick) and some other token's was not (its ticks after its state
    # must be read again).
    committed = await committed_offsets(bootstrap, kafka.monitor_group, kafka.ticks_topic)

    def reader() -> AIOKafkaConsumer:
        return make_reader(kafka, "test-state-reader")

    states = await read_states(reader, kafka.state_topic, list(range(PARTITIONS)))
    ahead = [k for p, s in states.items() for k, st in s.items() if st.offset > committed[p]]
    behind = [k for p, s in states.items() for k, st in s.items() if st.offset <= committed[p]]
    offsets = {p: sorted({st.offset for st in s.values()}) for p, s in states.items()}
    assert ahead and behind, (
        f"tokens not in different due states at the kill: committed {committed}, state "
        f"offsets {offsets}, revoked {a.events('monitor.partitions_revoked')} (a revoke "
        f"writes every changed token)")

    b = MonitorProcess(kafka, tmp_path / "b.log", extra_env=QUIET_GATES)
    await feed(1, b)
    assert b.stop() == 0, b.log_path.read_text()[-3000:]
    # A clean stop writes every changed token's state (none was due by age here), so the
    # group's offset is at the end of what was published.
    assert await group_caught_up(bootstrap, kafka.monitor_group, kafka.ticks_topic)
    before_c = await published(bootstrap, kafka)

    c = MonitorProcess(kafka, tmp_path / "c.log", extra_env=QUIET_GATES)
    try:
        await feed(2, c)
    finally:
        assert c.stop() == 0, c.log_path.read_text()[-3000:]
    assert await group_caught_up(bootstrap, kafka.monitor_group, kafka.ticks_topic)

    everything = await published(bootstrap, kafka)
    verdict = replaytruth.judge(everything, truth, replaytruth.owed(truth, ticks))
    verdict.assert_exact()
    assert verdict.duplicates > 0, "the kill -9 must have made the restart publish again"
    # After the SIGTERM, c published again nothing that was already out.
    earlier = Counter(replaytruth.identity(kind, v) for kind, v in before_c)
    now = Counter(replaytruth.identity(kind, v) for kind, v in everything)
    again = [ident for ident, n in earlier.items() if now[ident] > n]
    assert not again, f"{len(again)} outputs published again after a clean stop: {again[:3]}"


async def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        await consumer.topics()
        found = {}
        for p in range(PARTITIONS):
            found[p] = await consumer.committed(TopicPartition(topic, p)) or 0
        return found
    finally:
        await consumer.stop()
