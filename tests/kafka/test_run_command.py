"""``depeg-monitor run``: embedded broker, topics, the monitor; SIGTERM stops it all cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.kafka.embedded import free_port
from monitor.testing import publish
from monitor.ticks import make_tick
from tests.process_support import reap

from .kafkatools import TopicReader, log_events, tick_records, wait_for

pytestmark = pytest.mark.broker

TOKEN = "0xdac17f958d2ee523a2206206994597c13d831ec7"


def _spawn_run(port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DEPEG_KAFKA__EMBEDDED_PORT": str(port), "DEPEG_LOGGING__FORMAT": "json",
           "DEPEG_KAFKA__PARTITIONS": "2", "DEPEG_KAFKA__CHECKPOINT_INTERVAL_SECONDS": "0.5",
           # Its own data directory: the broker journal must not seed another test's run.
           "DEPEG_STORAGE__DATA_DIR": str(log.parent / "data")}
    env.pop("DEPEG_KAFKA__BOOTSTRAP_SERVERS", None)
    with log.open("ab") as fh:
        return subprocess.Popen([sys.executable, "-m", "monitor", "run", "--only", "monitor"],
                                env=env, stdout=fh, stderr=subprocess.STDOUT)


async def test_run_starts_embedded_broker_and_stops_cleanly(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "run.log"
    proc = _spawn_run(port, log)
    bootstrap = f"127.0.0.1:{port}"
    try:
        async def assigned() -> bool:
            assert proc.poll() is None, log.read_text()[-3000:]
            return any(e.get("event") == "monitor.partitions_assigned" for e in log_events(log))

        await wait_for(assigned, 60, "the monitor to join its group")
        names = [e.get("event") for e in log_events(log)]
        assert "run.embedded_broker" in names and "kafka.topics_created" in names
        ticks = [make_tick(1_678_000_000 + 60 * i, "eth", TOKEN, "USDT", "1.0001", "1")
                 for i in range(12)]
        await publish(bootstrap, "depeg.ticks", tick_records(ticks))
        async with TopicReader(bootstrap, "depeg.ratings") as ratings:
            await ratings.until(lambda r: len(r) >= 1, 30, "a rating snapshot")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()[-3000:]
    finally:
        reap(proc)
    names = [e.get("event") for e in log_events(log)]
    assert "monitor.stopped" in names  # batch finished, states written, offsets committed
    assert "run.embedded_broker_stopped" in names
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass  # the broker child is gone


def test_help_explains_configuration() -> None:
    for command in ("run", "monitor"):
        out = subprocess.run([sys.executable, "-m", "monitor", command, "--help"],
                             capture_output=True, text=True, check=True).stdout
        assert "bootstrap" in out and "DEPEG_" in out
