"""``produce simulate --cross-chain`` through the real broker: with the committed Token List
as registry (it names eth and arb USDC as asset ``usdc``), the spread stage publishes
cross-chain spread observations for the simulated pair, each the one the in-process stage
computes from the same generated ticks (the replay's truth). Before, the simulator had no
token of a multi-chain asset, so the live demo never showed a spread."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from monitor.config import Config, RegistryConfig
from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics
from monitor.spread.feed import SpreadFeed
from monitor.spread.service import SpreadDaemon
from monitor.ticks import decode_tick
from monitor.timefmt import parse_ts
from producers.synthetic import USDC_PAIR, cross_chain_pair, generate, make_tokens
from tests.kafka.kafkatools import TopicReader, fast_kafka, wait_for

pytestmark = pytest.mark.broker

REPO = Path(__file__).resolve().parents[2]
REGISTRY = REPO / "deploy" / "registry" / "pegged-tokens.tokenlist.json"
START = "2023-03-11T00:00:00Z"
TOKENS, RATE, SCALE, DURATION = 2, 400, 3600, 3

#: A spread observation: (ts, chain:token, spread bp, chains).
Observation = tuple[float, str, float | None, int | None]


async def test_simulated_usdc_pair_gets_cross_chain_spread_observations(
        broker: EmbeddedBroker) -> None:
    config = Config(kafka=fast_kafka(broker.bootstrap_servers),
                    registry=RegistryConfig(path=str(REGISTRY)))
    await ensure_topics(config.kafka)
    # The truth: the same ticks (same seed, start, interval, span) through the stage.
    tokens = make_tokens(TOKENS, 1) + cross_chain_pair(TOKENS, 1)
    ticks = list(generate(tokens, seed=1, start=parse_ts(START),
                          interval=SCALE * len(tokens) / RATE, duration=DURATION * SCALE))
    stage = SpreadFeed(config).stage
    assert stage is not None
    expected = {(t.ts, t.key, t.cross_chain_spread_bps, t.cross_chain_chains)
                for tick in ticks for t in stage.process(tick)}
    pair_keys = {f"{chain}:{address}" for chain, address in USDC_PAIR}
    assert {key for _, key, _, _ in expected} == pair_keys
    assert any(bps for _, _, bps, _ in expected)  # the arb depeg parts the two prices

    stop = asyncio.Event()
    spread = SpreadDaemon(config)
    task = asyncio.create_task(spread.run(stop))
    try:
        async def ready() -> bool:
            assert not task.done(), task
            return spread.ready.is_set()

        await wait_for(ready, 60, "the spread stage to start")
        done = await asyncio.to_thread(subprocess.run, [
            sys.executable, "-m", "monitor", "produce", "simulate", "--tokens", str(TOKENS),
            "--cross-chain", "--rate", str(RATE), "--time-scale", str(SCALE),
            "--duration", str(DURATION), "--start", START,
            "--bootstrap-servers", broker.bootstrap_servers],
            capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        async with TopicReader(broker.bootstrap_servers, config.kafka.ticks_topic) as reader:
            def observations(records: list[Any]) -> set[Observation]:
                out: set[Observation] = set()
                for r in records:
                    t = decode_tick(r.value)
                    if t.cross_chain_chains is not None:
                        out.add((t.ts, t.key, t.cross_chain_spread_bps, t.cross_chain_chains))
                return out

            def spread_seen(recs: list[Any]) -> bool:
                # A stage that died would otherwise show only as a timeout: say how.
                assert not task.done(), (task, None if task.cancelled() else task.exception(),
                                         spread.published, spread.skipped)
                return any(o[2] for o in observations(recs))

            await reader.until(spread_seen, 60,
                               "a non-zero spread observation of the simulated pair")
            got = observations(reader.records)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
    assert got and got <= expected
    assert {key for _, key, _, _ in got} <= pair_keys
