"""A snapshot cadence other than "every refresh" keeps the daemon equal to replay.

With ``model.snapshot_seconds`` = 900 (a rating snapshot at the first refresh of every
15 minutes, tier changes still at every 5-minute refresh) and a checkpoint interval other
than the fault matrix's, real ``depeg-monitor monitor`` processes are killed -9 and
restarted mid-stream on the real broker; every published rating and tier change must be
byte-identical to ``depeg-monitor replay`` run with the same setting (0 lost, 0 spurious,
0 differing). The cadence must survive a restore: the engine state carries the token's
last refresh, which decides the next snapshot. The restores also re-read the ticks that
compact state records leave out (held for lateness), which must change nothing either.

That re-read is made certain, not left to timing: the second half of the ticks is
published only after the first instance is dead, and the second instance is stopped only
once it has published ratings of its own, so its clean stop writes states that list held
ticks (which the third instance reads again). Waiting on a share of the ratings alone did
not ensure it: the first instance could publish past 60% before its kill took effect, and
the second then stopped before it had processed a tick.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics
from monitor.testing import publish

from . import replaytruth
from .faultrun import Progress, finish, matrix_files, published
from .kafkatools import (
    MonitorProcess,
    fast_kafka,
    load_ticks,
    tick_records,
    wait_for,
)

pytestmark = [pytest.mark.broker, pytest.mark.data]

CADENCE = {"DEPEG_MODEL__SNAPSHOT_SECONDS": "900"}


async def test_snapshot_cadence_equals_replay_across_kill9_and_restart(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    files = matrix_files(tmp_path)
    ticks = load_ticks(*files)
    truth = replaytruth.replay(files, tmp_path, env=CADENCE)
    (tmp_path / "every-refresh").mkdir()
    every_refresh = replaytruth.replay(files, tmp_path / "every-refresh")
    ratings = sum(1 for kind, _, _ in truth if kind == "rating")
    # The setting really thins the snapshots (else this test proves nothing new).
    assert 0 < ratings * 2 < sum(1 for kind, _, _ in every_refresh if kind == "rating")
    owed = replaytruth.owed(truth, ticks)

    kafka = fast_kafka(broker.bootstrap_servers, batch_max_records=200, partitions=4,
                       checkpoint_interval_seconds=1.5)
    await ensure_topics(kafka)
    records = tick_records(ticks)
    # Time-ordered, so the first half owes about half the ratings (the topic ends the same
    # as one publish of them all: per-partition order is kept).
    await publish(broker.bootstrap_servers, kafka.ticks_topic, records[:len(records) // 2])
    progress = Progress(broker, kafka, sum(1 for kind, _, _ in owed if kind == "rating"))

    def start(name: str) -> MonitorProcess:
        return MonitorProcess(kafka, tmp_path / f"{name}.log", extra_env=CADENCE)

    a = start("a")
    await progress.reached(0.3)
    a.kill9()
    a.stop()
    await publish(broker.bootstrap_servers, kafka.ticks_topic, records[len(records) // 2:])
    before_b = await progress.on_topic()
    b = start("b")

    async def b_took_partitions() -> bool:
        # a's last output may already count past 0.6: a SIGTERM before b has even set
        # its handlers would end it by the signal's default (exit -15), not cleanly.
        return bool(b.events("monitor.partitions_assigned"))

    await wait_for(b_took_partitions, 120, "the second instance to take its partitions")
    await progress.reached(0.6, beyond=before_b)
    assert b.stop() == 0  # SIGTERM: checkpoint, commit, leave
    c = start("c")
    await finish(broker, kafka, c)

    replaytruth.judge(await published(broker, kafka), truth, owed).assert_exact()
    # The restores really took the compact-state path: held ticks read again.
    assert any(e.get("reread_records") for p in (b, c)
               for e in p.events("monitor.partitions_assigned")), "no restore re-read"
    assert any(kind == "tier_change" for kind, _, _ in owed), "the input must change tiers"
