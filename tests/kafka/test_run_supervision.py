"""``depeg-monitor run`` as an SRE sees it: every service it runs is listed in ``/readyz``
(idle ones saying why), the journal's last save says what the next start gets back, and a
service that fails stops everything with an exit code a supervisor acts on (README,
"Exit codes")."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from monitor import run as run_module
from monitor.config import Config
from monitor.kafka.embedded import free_port
from monitor.logs import get_logger
from monitor.run import _supervise
from monitor.services import Service
from monitor.testing import publish
from monitor.ticks import make_tick
from tests.process_support import reap

from .kafkatools import log_events, tick_records, wait_for

pytestmark = pytest.mark.broker

TOKEN = "0xdac17f958d2ee523a2206206994597c13d831ec7"


def _spawn(tmp_path: Path, only: str, api_port: int, broker_port: int,
           **env: str) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / "run.log"
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(("DEPEG_KAFKA__", "DEPEG_CHAINS__", "DEPEG_REGISTRY__"))}
    full |= {"DEPEG_KAFKA__EMBEDDED_PORT": str(broker_port), "DEPEG_LOGGING__FORMAT": "json",
             "DEPEG_KAFKA__PARTITIONS": "1", "DEPEG_STORAGE__DATA_DIR": str(tmp_path / "data"),
             **env}
    with log.open("ab") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "monitor", "run", "--only", only,
                                 "--port", str(api_port)],
                                env=full, stdout=fh, stderr=subprocess.STDOUT)
    return proc, log


async def test_readyz_lists_idle_spread_and_chain_and_the_journal_save_counts(
        tmp_path: Path) -> None:
    """Idle spread stage (no multi-chain asset) and chain adapters (no rpc_urls) used to
    be absent from /readyz; run.journal_saved logged only its last cycle's count."""
    api_port, broker_port = free_port(), free_port()
    proc, log = _spawn(tmp_path, "spread,chain,api", api_port, broker_port)
    checks: dict[str, Any] = {}
    try:
        async with aiohttp.ClientSession() as http:
            async def listed() -> bool:
                nonlocal checks
                assert proc.poll() is None, log.read_text()[-3000:]
                try:
                    async with http.get(f"http://127.0.0.1:{api_port}/readyz") as resp:
                        checks = (await resp.json()).get("checks", {})
                except aiohttp.ClientError:
                    return False
                return {"spread", "chain"} <= set(checks)

            await wait_for(listed, 60, "/readyz to list spread and chain")
        assert checks["spread"]["ok"] and "idle" in checks["spread"]["detail"]
        assert "two or more chains" in checks["spread"]["detail"]
        assert checks["chain"]["ok"] and "rpc_urls" in checks["chain"]["detail"]
        # Records on the embedded broker: nothing of these services writes any, so the
        # journal must hold exactly these.
        ticks = [make_tick(1_678_000_000 + 60 * i, "eth", TOKEN, "USDT", "1", "1")
                 for i in range(7)]
        await publish(f"127.0.0.1:{broker_port}", "depeg.ticks", tick_records(ticks))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()[-3000:]
    finally:
        reap(proc)
    saved = [e for e in log_events(log) if e.get("event") == "run.journal_saved"]
    assert len(saved) == 1, log.read_text()[-3000:]
    assert saved[0]["records_held"] == len(ticks)
    assert saved[0]["copied_this_run"] == len(ticks)
    assert 0 <= saved[0]["records"] <= len(ticks)


def test_a_service_that_cannot_start_stops_run_with_exit_2_naming_it(tmp_path: Path) -> None:
    """The chain adapters with an unreadable token list: a configuration error, so exit 2
    (it was 1, as for a crash) with run.service_failed naming the service."""
    proc, log = _spawn(tmp_path, "chain", free_port(), free_port(),
                       DEPEG_CHAINS__ETH__RPC_URLS="http://127.0.0.1:1",
                       DEPEG_CHAINS__TOKENS_FILE=str(tmp_path / "missing.tokenlist.json"))
    try:
        assert proc.wait(120) == 2, log.read_text()[-3000:]
    finally:
        reap(proc)
    failed = [e for e in log_events(log) if e.get("event") == "run.service_failed"]
    assert [e["service"] for e in failed] == ["chain"]
    assert "missing.tokenlist.json" in failed[0]["error"]


async def _until_stopped(seen: list[str], name: str,
                         config: Config, stop: asyncio.Event) -> None:
    await stop.wait()
    seen.append(name)


@pytest.mark.parametrize("how", ["raises", "returns"])
async def test_a_service_that_crashes_or_quits_stops_the_others_exit_1(
        how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a supervisor sees: the other services stop cleanly (they see the stop event),
    run's supervision answers 1, and one error line names the service."""
    stopped: list[str] = []

    async def broken(config: Config, stop: asyncio.Event) -> None:
        await asyncio.sleep(0)
        if how == "raises":
            raise RuntimeError("boom")

    async def healthy(config: Config, stop: asyncio.Event) -> None:
        await _until_stopped(stopped, "healthy", config, stop)

    services = [Service("healthy", healthy, order=1), Service("broken", broken, order=2)]
    with capture_logs() as logs:
        # capture_logs sees only loggers bound after it starts; run's module logger may
        # already be cached by an earlier test in this process (cache_logger_on_first_use).
        monkeypatch.setattr(run_module, "log", get_logger(run_module.__name__))
        code = await _supervise(Config(), services, asyncio.Event())
    assert code == 1
    assert stopped == ["healthy"]
    errors = [(e["event"], e.get("service")) for e in logs if e["log_level"] == "error"]
    event = "run.service_failed" if how == "raises" else "run.service_exited"
    assert errors == [(event, "broken")]
