"""The ingest loop's record key check (``MonitorDaemon._process``): a token's address maps
to its key once seen, per partition; an address on two chains, and a record whose key is
not its tick's, must still be told apart exactly as a fresh check of every record would.

The truth: an engine fed the valid ticks directly, and the rule itself (a record key must
be ``chain:token`` of its tick)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import TopicPartition
from aiokafka.structs import ConsumerRecord

from monitor.config import Config
from monitor.daemon.ingest import MonitorDaemon
from monitor.daemon.partitions import PartitionState
from monitor.engine import Engine
from monitor.records import encode
from monitor.ticks import BadTick, encode_tick, make_tick

ADDRESS = "0x" + "7" * 40


class Writer:
    """Stands in for the Kafka writer: keeps outputs and dead letters."""

    def __init__(self) -> None:
        self.outputs: list[bytes] = []
        self.dead: list[tuple[int, str]] = []

    async def emit(self, outputs: list[Any]) -> None:
        self.outputs += [encode(o) for o in outputs]

    async def dead_letter(self, rec: Any, exc: BadTick) -> None:
        self.dead.append((rec.offset, exc.reason))

    def log_dead_letters(self) -> None:
        pass


def test_an_address_on_two_chains_and_wrong_record_keys() -> None:
    config = Config()
    daemon = MonitorDaemon(config)
    part = PartitionState.restore(0, config.model, 0, {})
    daemon._parts = {0: part}
    writer = Writer()
    daemon._out = writer  # type: ignore[assignment]
    truth = Engine(config.model)
    expected: list[bytes] = []
    wrong: list[int] = []
    records = []
    for offset in range(1200):
        chain = ("eth", "arb")[offset % 2]  # one address, two chains, interleaved
        tick = make_tick(1_700_000_000 + offset // 2, chain, ADDRESS, "USDX",
                         f"{0.99 - (offset % 50) * 1e-4:.6f}", "1")
        key: bytes | None = tick.key.encode()
        if offset % 97 == 13:  # the other chain's key (the same address): refused
            key = f"{('arb', 'eth')[offset % 2]}:{ADDRESS}".encode()
            wrong.append(offset)
        elif offset % 89 == 5:  # no key at all
            key = None
            wrong.append(offset)
        else:
            expected += [encode(o) for o in truth.process(tick)]
        value = encode_tick(tick)
        records.append(ConsumerRecord("t", 0, offset, 0, 0, key, value, None,
                                      len(key or b""), len(value), ()))

    async def feed() -> None:
        for start in range(0, len(records), 100):
            await daemon._process({TopicPartition("t", 0): records[start:start + 100]}, 0)

    asyncio.run(feed())
    assert writer.dead == [(offset, "bad_key") for offset in wrong]
    assert daemon.stats.records == len(records)
    assert daemon.stats.ticks == len(records) - len(wrong) == truth.stats.ticks
    assert expected and writer.outputs == expected
    assert part.engine.export_state(f"eth:{ADDRESS}") == truth.export_state(f"eth:{ADDRESS}")
    assert part.engine.export_state(f"arb:{ADDRESS}") == truth.export_state(f"arb:{ADDRESS}")
