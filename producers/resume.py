"""``produce replay --resume``: publish only what the ticks topic does not hold yet.

A producer stopped part-way (Ctrl-C, a broker or ``run`` restart, kill -9) has published,
for every token, a prefix of that token's ticks: one token's ticks share a partition and the
broker appends them in the order they were sent. So the newest event time of each token on
the topic says where that token's file rows continue; reading the topic to its true end
(``monitor.kafka.readall``) finds it. Rows at or before it are skipped, the rest published:
nothing twice, nothing left out (as long as a token has no two rows with the same time).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from aiokafka import TopicPartition

from monitor.config import KafkaConfig
from monitor.kafka.closing import close_bounded
from monitor.kafka.readall import read_from_start
from monitor.kafka.topics import admin_client, make_reader, partition_counts
from monitor.tickfiles import Row
from monitor.ticks import BadTick, Tick, decode_tick


async def newest_per_token(bootstrap: str, kafka: KafkaConfig) -> dict[str, float]:
    """``chain:token`` -> event time of its newest tick on ``kafka.ticks_topic``."""
    admin = admin_client(kafka, bootstrap)
    await admin.start()
    try:
        count = (await partition_counts(admin, [kafka.ticks_topic]))[kafka.ticks_topic]
    finally:
        await admin.close()
    newest: dict[str, float] = {}

    def keep(tp: TopicPartition, records: list[Any]) -> None:
        for rec in records:
            try:
                tick = decode_tick(rec.value)
            except BadTick:
                continue  # not ours to judge; the monitor dead-letters it
            if tick.ts > newest.get(tick.key, float("-inf")):
                newest[tick.key] = tick.ts

    reader = make_reader(kafka, f"{kafka.client_id}-resume", bootstrap_servers=bootstrap)
    await reader.start()
    try:
        await read_from_start(reader, [TopicPartition(kafka.ticks_topic, p)
                                       for p in range(count)], keep)
    finally:
        await close_bounded(reader.stop(), "reader_stop", "produce.close_failed")
    return newest


class Resume:
    """Filters rows: ticks at or before their token's newest published time are dropped."""

    def __init__(self, newest: dict[str, float]) -> None:
        self.newest = newest
        self.skipped = 0

    def rows(self, rows: Iterable[Row]) -> Iterator[Row]:
        for row in rows:
            if isinstance(row, Tick) and row.ts <= self.newest.get(row.key, float("-inf")):
                self.skipped += 1
                continue
            yield row
