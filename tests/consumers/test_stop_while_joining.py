"""SIGTERM while a consumer waits to join its group behind a member killed with -9.

The ``deliver`` worker and the ``store`` writer give their consumers their topics when
they make them, so aiokafka's start waits until the group hands out partitions: after a
member died, until the broker gives up on it (its session timeout) and rebalances. A stop
asked for meanwhile used to wait for all of that. Here the dead member's session is 20 s
(set through ``kafka.session_timeout_ms``, which these consumers now take, as the
monitor's do): the second process must still end cleanly within seconds of its SIGTERM.
With the 10 s default (what they took before) the old wait ended ~18 s after the SIGTERM,
so the bound below fails both the old wait and a session setting not taken.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

import aiohttp
import pytest

from monitor.kafka.embedded import EmbeddedBroker, free_port
from monitor.storage import connect
from tests.process_support import reap
from tests.webhook_support import (
    ENCRYPTION_KEY,
    cli_command,
    create_topic,
    produce,
    tier_change,
    wait_until,
)

pytestmark = pytest.mark.broker

TOPIC = "depeg.tier-changes"
#: The dead member's session: longer than a stop may take. (The test broker also holds a
#: new group's first join for half of it: 10 s of this test.)
SESSION_MS = 20_000
#: How long the second process may take to end after its SIGTERM: the consumer's close
#: waits at most 5 s for the abandoned join (kafka/closing.py), then the process exits
#: (5.2-5.6 s here; the old wait: 18 s, with the 10 s default session it took).
STOP_WITHIN = 12.0

#: Per command: the table a tier change consumed from the topic lands in.
LANDS_IN = {"deliver": "webhook_events", "store": "tier_changes"}


def start(command: str, broker: EmbeddedBroker, db_path: Path, ops_port: int,
          log: Path) -> subprocess.Popen[bytes]:
    settings = {
        "DEPEG_STORAGE__URL": f"sqlite:///{db_path}",
        "DEPEG_KAFKA__BOOTSTRAP_SERVERS": broker.bootstrap_servers,
        "DEPEG_KAFKA__TIER_CHANGES_TOPIC": TOPIC,
        "DEPEG_KAFKA__BATCH_TIMEOUT_MS": "50",
        "DEPEG_KAFKA__SESSION_TIMEOUT_MS": str(SESSION_MS),
        "DEPEG_DELIVERY__ALLOW_LOOPBACK": "true",
        "DEPEG_DELIVERY__SECRET_ENCRYPTION_KEY": ENCRYPTION_KEY,
        "DEPEG_METRICS__PORT": str(ops_port),
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEPEG_")} | settings
    return subprocess.Popen([*cli_command(), "--log-format", "json", command], env=env,
                            stdout=log.open("ab"), stderr=subprocess.STDOUT)


async def answers(port: int) -> bool:
    """The process serves /healthz: its signal handlers are in place (services.py)."""
    try:
        async with aiohttp.ClientSession() as session, \
                session.get(f"http://127.0.0.1:{port}/healthz") as resp:
            return resp.status in (200, 503)
    except aiohttp.ClientError:
        return False


async def rows(db_path: Path, table: str) -> int:
    if not await asyncio.to_thread(db_path.exists):
        return 0
    db = await connect(f"sqlite:///{db_path}")
    try:
        return int(await db.fetchval(f"SELECT COUNT(*) FROM {table}"))
    except Exception:  # not migrated yet
        return 0
    finally:
        await db.close()


@pytest.mark.parametrize("command", sorted(LANDS_IN))
async def test_sigterm_while_joining_behind_a_dead_member_ends_promptly(
        broker: EmbeddedBroker, tmp_path: Path, command: str) -> None:
    db_path, log = tmp_path / "service.db", tmp_path / "service.log"
    await create_topic(broker.bootstrap_servers, TOPIC)
    first = start(command, broker, db_path, free_port(), log)
    try:
        # In the group: a tier change produced now reaches the database only through the
        # consumer, which reads only once it holds the partition.
        await produce(broker.bootstrap_servers, TOPIC, [tier_change()])

        async def consumed() -> bool:
            assert first.poll() is None, log.read_text()[-2000:]
            return await rows(db_path, LANDS_IN[command]) == 1

        await wait_until(consumed, 60, what=f"{command} to consume the tier change")
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        reap(first)

    port = free_port()
    second = start(command, broker, db_path, port, log)
    try:
        async def serving() -> bool:
            assert second.poll() is None, log.read_text()[-2000:]
            return await answers(port)

        await wait_until(serving, 60, what=f"the second {command} to serve /healthz")
        second.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(second.wait, STOP_WITHIN)
        assert code == 0, log.read_text()[-3000:]
    finally:
        reap(second)
    # Nothing was lost by stopping early: what the first one consumed is still there.
    assert await rows(db_path, LANDS_IN[command]) == 1
