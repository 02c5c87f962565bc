"""Restarts of the embedded default: ``depeg-monitor run`` with its memory-only broker is
stopped with SIGTERM mid-stream, then killed -9, and started again each time on the same
data directory. The broker journal (``monitor/kafka/journal.py``) puts the topics and the
consumer offsets back, so the monitor continues exactly: every rating and tier change on
the final broker is byte-identical to ``depeg-monitor replay`` of all the input, none
lost, none spurious."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from monitor.kafka.embedded import free_port
from monitor.kafka.journal import FILE_NAME
from monitor.testing import publish
from monitor.tickfiles import BadRow, read_file
from producers.csvout import write_ticks_file
from producers.synthetic import generate, make_tokens
from tests.conftest import data_file

from . import replaytruth
from .kafkatools import (
    TopicReader,
    group_caught_up,
    load_ticks,
    tick_records,
    wait_for,
)

pytestmark = [pytest.mark.broker, pytest.mark.data]

DAYS = (1678449600.0, 1678557600.0)  # 2023-03-10 12:00 to 03-11 18:00 UTC (SVB)


class Run:
    """``depeg-monitor run --only monitor`` on a data directory, JSON logs in a file."""

    #: The one service ``run`` starts, and the settings it gets beyond the common ones.
    ONLY = "monitor"
    #: A token's state is due after 1 s here, not the default 900 s: the test waits for the
    #: group to commit every tick, which the state cadence holds back until each token's
    #: state is written (docs/recovery.md, "Cadences"; kafkatools.fast_kafka does the same).
    EXTRA_ENV: ClassVar[dict[str, str]] = {"DEPEG_KAFKA__BATCH_MAX_RECORDS": "200",
                                           "DEPEG_KAFKA__STATE_MAX_AGE_SECONDS": "1.0"}

    def __init__(self, data: Path, log: Path) -> None:
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log = log
        env = {**os.environ, "DEPEG_KAFKA__EMBEDDED_PORT": str(self.port),
               "DEPEG_LOGGING__FORMAT": "json", "DEPEG_KAFKA__PARTITIONS": "3",
               "DEPEG_KAFKA__CHECKPOINT_INTERVAL_SECONDS": "0.5",
               "DEPEG_METRICS__PORT": "0", "DEPEG_STORAGE__DATA_DIR": str(data),
               **self.EXTRA_ENV}
        env.pop("DEPEG_KAFKA__BOOTSTRAP_SERVERS", None)
        with log.open("ab") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "monitor", "run", "--only", self.ONLY],
                env=env, stdout=fh, stderr=subprocess.STDOUT)

    def events(self, name: str) -> list[dict[str, object]]:
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            if name in line:
                try:
                    found.append(json.loads(line))
                except ValueError:
                    continue
        return [e for e in found if e.get("event") == name]

    async def has(self, name: str) -> bool:
        assert self.proc.poll() is None, self.log.read_text()[-3000:]
        return bool(self.events(name))

    def sigterm(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def _journaled_commits(data: Path, group: str, topic: str) -> int:
    with sqlite3.connect(data / FILE_NAME) as db:
        row = db.execute("SELECT COALESCE(SUM(off), 0) FROM journal_offsets "
                         "WHERE group_id = ? AND topic = ?", (group, topic)).fetchone()
    return int(row[0])


def _port_closed(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return True
    return False


async def test_run_continues_exactly_after_sigterm_and_kill9(tmp_path: Path) -> None:
    usdc, simulated = tmp_path / "usdc.csv", tmp_path / "simulated.csv"
    write_ticks_file([t for t in read_file(data_file("ticks/usdc_2023-03_binanceus_1m.csv"))
                      if not isinstance(t, BadRow) and DAYS[0] <= t.ts < DAYS[1]], usdc)
    write_ticks_file(generate(make_tokens(6, seed=5), seed=5, start=DAYS[0], interval=600.0,
                              duration=DAYS[1] - DAYS[0]), simulated)
    ticks = load_ticks(usdc, simulated)
    truth = replaytruth.replay([usdc, simulated], tmp_path)
    owed = replaytruth.owed(truth, ticks)
    owed_ratings = sum(1 for kind, _, _ in owed if kind == "rating")
    first, rest = ticks[:int(len(ticks) * 0.7)], ticks[int(len(ticks) * 0.7):]
    data = tmp_path / "data"

    # 1. SIGTERM while the monitor is in the middle of the first 70 % of the ticks.
    run = Run(data, tmp_path / "run1.log")
    try:
        await wait_for(lambda: run.has("monitor.partitions_assigned"), 60, "run 1 assigned")
        await publish(run.bootstrap, "depeg.ticks", tick_records(first))
        async with TopicReader(run.bootstrap, "depeg.ratings") as ratings:
            await ratings.until(lambda r: len(r) >= 0.3 * owed_ratings, 120, "30% of ratings")
        assert run.sigterm() == 0, run.log.read_text()[-3000:]
    finally:
        if run.proc.poll() is None:
            run.kill9()
    assert run.events("run.journal_saved"), run.log.read_text()[-4000:]

    # 2. Start again: the rest of the first part is processed from where it stopped; once
    #    the journal holds the final offsets, kill -9 (the broker child dies with it).
    run = Run(data, tmp_path / "run2.log")
    try:
        await wait_for(lambda: run.has("monitor.partitions_assigned"), 60, "run 2 assigned")
        assert run.events("run.journal_restored")
        await wait_for(lambda: group_caught_up(run.bootstrap, "depeg-monitor", "depeg.ticks"),
                       120, "run 2 to commit every tick")

        async def journaled() -> bool:
            return _journaled_commits(data, "depeg-monitor", "depeg.ticks") == len(first)

        await wait_for(journaled, 30, "the journal to hold the final offsets "
                       f"({_journaled_commits(data, 'depeg-monitor', 'depeg.ticks')} of "
                       f"{len(first)}; {run.events('run.journal_failed')[-1:]})")
    finally:
        run.kill9()
    await wait_for(lambda: _async(_port_closed(run.port)), 15, "the broker to die with run")

    # 3. Start again and feed the rest.
    run = Run(data, tmp_path / "run3.log")
    try:
        await wait_for(lambda: run.has("monitor.partitions_assigned"), 60, "run 3 assigned")
        await publish(run.bootstrap, "depeg.ticks", tick_records(rest))
        await wait_for(lambda: group_caught_up(run.bootstrap, "depeg-monitor", "depeg.ticks"),
                       120, "run 3 to commit every tick")
        published: list[tuple[str, bytes]] = []
        for kind, topic in (("rating", "depeg.ratings"), ("tier_change", "depeg.tier-changes")):
            async with TopicReader(run.bootstrap, topic) as reader:
                while await reader.poll(1000):
                    pass
                published += [(kind, rec.value) for rec in reader.records]
        assert run.sigterm() == 0
    finally:
        if run.proc.poll() is None:
            run.kill9()
    replaytruth.judge(published, truth, owed).assert_exact()


async def _async(value: bool) -> bool:
    return value
