"""The `chain` service inside `run`: idle without RPC URLs (never stops the other services),
a clear start-up error for a broken watch list."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from monitor.config import ChainsConfig, Config
from monitor.services import StartupError
from producers.chain_service import run_service


async def test_without_rpc_urls_the_service_idles_until_stopped() -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(run_service(Config(), stop))
    await asyncio.sleep(0)  # let it start; it must still be running, not returned
    done, _ = await asyncio.wait({task}, timeout=0.5)
    assert not done, "an early return would make `run` stop every service"
    stop.set()
    await asyncio.wait_for(task, 10)


async def test_a_broken_watch_list_is_a_startup_error(tmp_path: Path) -> None:
    bad = tmp_path / "tokens.json"
    bad.write_text('{"tokens": []}')
    config = Config(chains=ChainsConfig(tokens_file=str(bad)))
    with pytest.raises(StartupError, match=r"tokens\.json"):
        await run_service(config, asyncio.Event())
