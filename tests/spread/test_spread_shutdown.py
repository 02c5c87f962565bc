"""The spread stage against a broker that never answers: it retries, says so in its log,
stays "restoring state" in ``/readyz``, and a stop ends it after the shutdown grace.

The stage shares its retry policy with the daemons (``monitor/daemon/brokercalls.py``) but
differs in one point on purpose: a stop before its consumer is up still grants the whole
grace period (the daemons give up at once then), so retries go on after the stop.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from structlog.testing import capture_logs

import monitor.daemon.retry as retry_module
import monitor.spread.service as service_module
from monitor.config import Config, RegistryConfig
from monitor.logs import get_logger
from monitor.spread.service import SpreadDaemon
from tests.kafka.kafkatools import fast_kafka, wait_for

from . import multichain

pytestmark = pytest.mark.data


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def uncached_loggers(monkeypatch: pytest.MonkeyPatch) -> None:
    """capture_logs sees only loggers bound after it starts: a module logger that an
    earlier test in this process already used is cached (``cache_logger_on_first_use``)
    and would log past it, so the modules under test get fresh ones."""
    for module in (service_module, retry_module):
        monkeypatch.setattr(module, "log", get_logger(module.__name__))


async def test_a_stop_during_an_outage_ends_after_the_grace_without_a_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry, _ = multichain.build(tmp_path, "2023-03-11T00", "2023-03-11T01")
    kafka = fast_kafka(f"127.0.0.1:{closed_port()}", retry_backoff_seconds=0.05,
                       retry_backoff_max_seconds=0.1, shutdown_grace_seconds=1.0)
    config = Config(kafka=kafka, registry=RegistryConfig(path=str(registry)))
    daemon = SpreadDaemon(config)
    stop = asyncio.Event()
    with capture_logs() as logs:
        uncached_loggers(monkeypatch)
        task = asyncio.create_task(daemon.run(stop))

        async def failed_twice() -> bool:
            return sum(1 for e in logs if e["event"] == "spread.broker_error") >= 2

        await wait_for(failed_twice, 30, "the stage to report broker errors")
        assert await daemon.check() == (False, "restoring state")
        stop.set()
        stopped_at = len(logs)
        await asyncio.wait_for(task, 60)  # a bound on a hang, not a timing assertion
    events = [e["event"] for e in logs]
    failure = next(e for e in logs if e["event"] == "spread.broker_error")
    assert failure["operation"] == "ensure_topics" and failure["log_level"] == "warning"
    assert "kafka.retry" in events[stopped_at:]  # the grace was granted before start-up
    assert events[-1] == "spread.shutdown_incomplete"
    assert "spread.started" not in events and "spread.stopped" not in events
    assert not daemon.ready.is_set()

