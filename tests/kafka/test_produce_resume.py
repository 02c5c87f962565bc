"""``produce replay --resume`` after an interrupted publish: every tick of the files ends up
on the topic exactly once (nothing twice, nothing left out)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from monitor.kafka.embedded import EmbeddedBroker
from monitor.kafka.topics import ensure_topics
from monitor.testing import publish
from monitor.ticks import encode_tick
from producers.csvout import write_ticks_file
from producers.synthetic import generate, make_tokens

from .kafkatools import TopicReader, fast_kafka, load_ticks, tick_records

pytestmark = [pytest.mark.broker]


async def test_resume_publishes_the_rest_once(broker: EmbeddedBroker, tmp_path: Path) -> None:
    kafka = fast_kafka(broker.bootstrap_servers, partitions=3)
    await ensure_topics(kafka)
    path = tmp_path / "ticks.csv"
    write_ticks_file(generate(make_tokens(8, seed=2), seed=2, start=1_700_000_000.0,
                              interval=60.0, duration=3 * 3600.0), path)
    ticks = load_ticks(path)
    # An interrupted publish: each token got a different prefix of its own ticks.
    keys = sorted({t.key for t in ticks})
    cut = {key: (i + 1) * 20 for i, key in enumerate(keys)}
    seen: Counter[str] = Counter()
    prefix = []
    for t in ticks:
        seen[t.key] += 1
        if seen[t.key] <= cut[t.key]:
            prefix.append(t)
    await publish(broker.bootstrap_servers, kafka.ticks_topic, tick_records(prefix))

    env = {**os.environ, "DEPEG_KAFKA__PARTITIONS": "3"}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "monitor", "produce", "replay", str(path), "--resume",
         "--bootstrap-servers", broker.bootstrap_servers],
        env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"published {len(ticks) - len(prefix)} ticks" in done.stdout

    async with TopicReader(broker.bootstrap_servers, kafka.ticks_topic) as reader:
        while await reader.poll(1000):
            pass
        on_topic = Counter(rec.value for rec in reader.records)
    assert on_topic == Counter(encode_tick(t) for t in ticks)
