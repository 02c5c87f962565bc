"""Helpers for producer tests: read a topic back from the real broker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest
from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]
from aiokafka.structs import ConsumerRecord  # type: ignore[import-untyped]

ReadTopic = Callable[..., Awaitable[list[ConsumerRecord]]]


async def read_topic(bootstrap: str, topic: str, expect: int, timeout: float = 20.0,
                     settle: float = 0.5) -> list[ConsumerRecord]:
    """Every record of ``topic`` from the start: stops at ``expect`` records, then keeps
    polling ``settle`` seconds more so that extra (unexpected) records are seen too."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=None)
    await consumer.start()
    records: list[ConsumerRecord] = []
    try:
        deadline = time.monotonic() + timeout
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


@pytest.fixture
def topic_reader() -> Callable[..., list[ConsumerRecord]]:
    """Synchronous wrapper (producer commands run their own event loop)."""

    def read(bootstrap: str, topic: str, expect: int, **kw: float) -> list[ConsumerRecord]:
        return asyncio.run(read_topic(bootstrap, topic, expect, **kw))

    return read
