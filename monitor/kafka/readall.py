"""Reading partitions to their TRUE end, on every broker.

A ListOffsets answer (``end_offsets``) is not the end on the embedded Tansu broker: it
reports the start of a partition's last record batch plus one, so "read up to the end
offset" silently drops every record of the last batch but the first (DESIGN.md,
infrastructure facts). What is right on Tansu and on Kafka is the high watermark each
*fetch* response carries: a partition is read to its end once the consumer's position
reached the high watermark of a fetch made at that position.

Used by state restore (``monitor.daemon.state``), by the tests' "caught up" check, and
meant for any other daemon that rebuilds state from a changelog topic.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaTimeoutError

from .fetched import Record

RecordsHandler = Callable[[TopicPartition, list[Record]], None]

#: ``fetch_max_wait_ms`` of a consumer made to read partitions to their end
#: (``topics.make_reader``). A fetch at a partition's end finds no record, and the broker
#: holds it this long before it answers with the high watermark this module waits for.
#: At Kafka's and aiokafka's 500 ms, reading a caught-up partition took ~1 s (two rounds):
#: every state restore, and the embedded broker's journal nine times a cycle (a cycle
#: meant to run every second took 9 s, and so did saving it on stop). At 20 ms: ~0.03 s.
READER_FETCH_WAIT_MS = 20


async def read_to_end(
    reader: AIOKafkaConsumer, tps: Iterable[TopicPartition], handle: RecordsHandler, *,
    fetch_max_records: int = 5000, poll_ms: int = 50, stall_seconds: float = 30.0,
) -> dict[TopicPartition, int]:
    """Hand every record from each partition's current position to its true end to
    ``handle``; return where each partition ended.

    ``reader`` must already be assigned ``tps`` and positioned (``seek_to_beginning`` or
    ``seek``), and made with a short fetch wait (:data:`READER_FETCH_WAIT_MS`) unless
    waiting ~0.5 s at the end is fine (a long-lived reader that goes on polling). Done
    for a partition when its position reached the high watermark reported by a fetch
    response (aiokafka records it even for an empty fetch). Raises
    :class:`KafkaTimeoutError` (retriable) when no partition made progress for
    ``stall_seconds``: an unreachable broker must not hang a restore forever.
    """
    todo = set(tps)
    ends: dict[TopicPartition, int] = {}
    last_progress = time.monotonic()
    while todo:
        batch = await reader.getmany(*todo, timeout_ms=poll_ms, max_records=fetch_max_records)
        for tp, records in batch.items():
            if records:
                handle(tp, records)
                last_progress = time.monotonic()
        for tp in list(todo):
            highwater = reader.highwater(tp)
            position = await reader.position(tp)
            if highwater is not None and position >= highwater:
                ends[tp] = position
                todo.discard(tp)
                last_progress = time.monotonic()
        if todo and time.monotonic() - last_progress > stall_seconds:
            raise KafkaTimeoutError(
                f"reading {sorted(tp.partition for tp in todo)} of "
                f"{next(iter(todo)).topic}: no progress for {stall_seconds:.0f}s")
    return ends


async def read_from_start(reader: AIOKafkaConsumer, tps: list[TopicPartition],
                          handle: RecordsHandler, **options: Any) -> dict[TopicPartition, int]:
    """:func:`read_to_end` of ``tps`` from their beginning (assigned to ``reader`` here):
    a whole changelog, or a whole topic."""
    reader.assign(tps)
    await reader.seek_to_beginning(*tps)
    return await read_to_end(reader, tps, handle, **options)


async def read_whole_topic(bootstrap_servers: str, topic: str, partitions: int,
                           handle: RecordsHandler) -> None:
    """Every record of ``topic`` (its ``partitions`` partitions) from the start to the true
    end, through a reader of its own in no group, started and stopped here: a check's or
    a benchmark's independent view of what a topic holds."""
    reader = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=None,
                              enable_auto_commit=False, auto_offset_reset="earliest",
                              fetch_max_wait_ms=READER_FETCH_WAIT_MS)
    await reader.start()
    try:
        await read_from_start(reader, [TopicPartition(topic, p) for p in range(partitions)],
                              handle)
    finally:
        await reader.stop()


async def true_end_offsets(reader: AIOKafkaConsumer, tps: list[TopicPartition],
                           **options: Any) -> dict[TopicPartition, int]:
    """Each partition's real end offset (the offset the next record will get).

    ``end_offsets`` is only a lower bound on Tansu (see the module docstring), so read on
    from one record before it to the fetch high watermark; that costs at most one batch.
    """
    if not tps:
        return {}
    reader.assign(tps)
    hints = await reader.end_offsets(tps)
    for tp in tps:
        reader.seek(tp, max(int(hints[tp]) - 1, 0))
    return await read_to_end(reader, tps, lambda tp, records: None, **options)
