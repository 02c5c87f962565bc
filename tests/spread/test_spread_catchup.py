"""A boundary that waits only for the reader to catch up is published once it has, even
when the records that complete the catch-up belong to no asset.

Regression: the stage asked "caught up?" only when a tick of the asset came in. A reader
whose last records were other tokens' ticks (or its own outputs read back) held the
boundary until the asset's next tick, for ever at the end of a finite input (a CI run of
tests/spread/test_simulate_spread.py timed out that way).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from monitor.config import Config, RegistryConfig
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics
from monitor.spread.feed import SpreadFeed
from monitor.spread.service import SpreadDaemon
from monitor.testing import publish
from monitor.ticks import decode_tick, make_tick
from tests.kafka.kafkatools import TopicReader, fast_kafka, tick_records

pytestmark = pytest.mark.broker

ETH, ARB, OTHER = "0x" + "a" * 40, "0x" + "b" * 40, "0x" + "c" * 40
#: USDC registered on two chains; arb never ticks, so every boundary of eth's USDC waits
#: for arb until the reader has read everything there is.
REGISTRY = "".join(f'[[token]]\nchain = "{chain}"\naddress = "{address}"\nsymbol = "USDC"\n'
                   'asset = "usdc"\n\n' for chain, address in (("eth", ETH), ("arb", ARB)))


async def test_the_last_boundary_is_published_when_other_tokens_end_the_input(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    registry = tmp_path / "registry.toml"
    registry.write_text(REGISTRY)
    # One partition: the asset's ticks first, then only a token of no asset, so the last
    # tick of the asset is read while the reader is not caught up.
    config = Config(kafka=fast_kafka(broker.bootstrap_servers, partitions=1),
                    registry=RegistryConfig(path=str(registry)))
    t0 = 1_678_000_000
    ticks = [make_tick(t0 + ts, "eth", ETH, "USDC", "0.999", "1") for ts in (10, 200, 400)]
    ticks += [make_tick(t0 + 400 + i, "eth", OTHER, "DAI", "1.0", "1") for i in range(50)]
    # The truth: the in-process stage over the same ticks (a replay is always caught up).
    stage = SpreadFeed(config).stage
    assert stage is not None
    expected = {(t.ts, t.key, t.cross_chain_spread_bps, t.cross_chain_chains)
                for tick in ticks for t in stage.process(tick)}
    assert expected == {(float(t0 - t0 % 300 + 300), f"eth:{ETH}", None, 1)}

    await ensure_topics(config.kafka)
    await publish(broker.bootstrap_servers, config.kafka.ticks_topic, tick_records(ticks))
    stop = asyncio.Event()
    spread = SpreadDaemon(config)
    task = asyncio.create_task(spread.run(stop))
    try:
        async with TopicReader(broker.bootstrap_servers, config.kafka.ticks_topic) as reader:
            def observed(records: list[Any]) -> bool:
                assert not task.done(), task
                return any(decode_tick(r.value).cross_chain_chains is not None
                           for r in records)

            await reader.until(observed, 30, "the boundary's spread observation")
            await reader.poll(500)  # nothing more may follow (no duplicate)
            got = [decode_tick(r.value) for r in reader.records]
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    assert [(t.ts, t.key, t.cross_chain_spread_bps, t.cross_chain_chains)
            for t in got if t.cross_chain_chains is not None] == sorted(expected)
