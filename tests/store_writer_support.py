"""The store writer tests' replay: a new consumer group reads every topic from the start."""

from __future__ import annotations

import asyncio

from consumers.store_writer import StoreWriter
from monitor.config import Config
from monitor.storage.ratings import RatingsStore
from tests.readapi_support import wait_for


async def replay_from_start(config: Config, store: RatingsStore, records: int) -> None:
    """Run a store writer in a group of its own until it has counted ``records`` records,
    then stop it: what it writes again must change no row (the writes are idempotent)."""
    again = StoreWriter(config, store, group_id="replay-from-start")
    stop = asyncio.Event()
    task = asyncio.create_task(again.run(stop))
    await wait_for(lambda: again.stats.records >= records)
    stop.set()
    await asyncio.wait_for(task, 10)
