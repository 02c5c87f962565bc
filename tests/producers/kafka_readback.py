"""Producer tests' helper: read a topic back from the real broker (not a conftest, so
that ``from conftest import data_file`` keeps meaning tests/conftest.py)."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped, unused-ignore]
from aiokafka.structs import ConsumerRecord  # type: ignore[import-untyped, unused-ignore]


async def read_topic(bootstrap: str, topic: str, expect: int, wait: float = 20.0,
                     settle: float = 0.5) -> list[ConsumerRecord]:
    """Every record of ``topic`` from the start: stops at ``expect`` records, then keeps
    polling ``settle`` seconds more so that extra (unexpected) records are seen too."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=None)
    await consumer.start()
    records: list[ConsumerRecord] = []
    try:
        deadline = time.monotonic() + wait
        quiet_until: float | None = None
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=200)
            for part in batch.values():
                records.extend(part)
            if len(records) >= expect:
                quiet_until = quiet_until or time.monotonic() + settle
                if time.monotonic() >= quiet_until:
                    break
    finally:
        await consumer.stop()
    return records


def topic_reader(bootstrap: str, topic: str, expect: int, **kw: float) -> list[ConsumerRecord]:
    """Synchronous :func:`read_topic` (producer commands run their own event loop)."""
    return asyncio.run(read_topic(bootstrap, topic, expect, **kw))
