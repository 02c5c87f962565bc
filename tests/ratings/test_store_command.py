"""The store writer as a process: runs from config, stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from monitor.kafka.embedded import EmbeddedBroker
from monitor.storage import connect

SCRIPT = (
    "import sys; from consumers.store_cli import command; "
    "from monitor.config import load_config; from monitor.logs import configure_logging; "
    "import argparse; p = argparse.ArgumentParser(); command.add_arguments(p); "
    "configure_logging('info', 'json'); "
    "sys.exit(command.run(p.parse_args([]), load_config()))"
)


async def _count_latest(db_path: Path) -> int:
    db = await connect(f"sqlite:///{db_path}")
    try:
        return int(await db.fetchval("SELECT COUNT(*) FROM rating_latest"))
    finally:
        await db.close()


def test_store_command_migrates_and_stops_on_sigterm(broker: EmbeddedBroker,
                                                     tmp_path: Path) -> None:
    db_path = tmp_path / "store.db"
    env = {**os.environ, "DEPEG_KAFKA__BOOTSTRAP_SERVERS": broker.bootstrap_servers,
           "DEPEG_STORAGE__URL": f"sqlite:///{db_path}", "DEPEG_METRICS__PORT": "0"}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 30
        started = False
        assert proc.stderr is not None
        while time.monotonic() < deadline and not started:
            line = proc.stderr.readline()
            started = "store_writer.started" in line
        assert started
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
        rest = proc.stderr.read()
        assert "store_writer.stopped" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
    assert asyncio.run(_count_latest(db_path)) == 0  # the tables exist: migrated on start
