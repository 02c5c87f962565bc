"""Token state on the compacted state topic: what a restarted or rebalanced instance resumes.

One record per token per checkpoint, keyed ``chain:token`` and written to the *same
partition number* as the token's ticks, so an instance that is assigned tick partition
``p`` reads exactly state partition ``p``. A record says: "this engine state contains every
tick of this token at offsets below ``offset`` of tick partition ``partition``, and none at
or above it". That sentence is what makes recovery exact:

- the consumer resumes each partition at its committed offset ``C``; a checkpoint writes
  the states (and waits for the broker) *before* it commits, so every tick below ``C`` is
  inside some state record;
- a state record may be newer than ``C`` (a crash between writing states and committing):
  the ingest loop then skips that token's ticks below the record's ``offset``, because the
  state already holds them, and processes the rest; outputs between ``C`` and the crash are
  re-produced byte for byte with the same event ids.

On the wire (version 2) the engine state is deflated (``zlib``, stdlib): an engine state is
msgpack of a bucket ring (mostly repeated or empty floats) and the ticks held for lateness
(the token's chain, address and symbol repeated in each), so it shrinks 3x at one tick a
minute (5.1 KB -> 1.9 KB) and 7-8x at one a second (33 KB -> 4.3 KB); the lateness buffer
still grows with tick density, only far slower. Version 1 records (engine state as is)
still load. In memory a :class:`StateRecord` always holds the engine state as
``Engine.export_state`` made it.

Never ``offsets_for_times``: it is wrong on the embedded broker (DESIGN.md).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition

from ..kafka.readall import read_to_end
from ..logs import get_logger

log = get_logger(__name__)

#: 1: engine state as is; 2: engine state deflated (what ``encode_state`` writes).
STATE_VERSION = 2
#: Fast deflate: level 6 saves only ~3% more here and costs the checkpoint (held under the
#: batch lock) several times the CPU.
_DEFLATE_LEVEL = 1


class StateRecord(msgspec.Struct, array_like=True, frozen=True):
    version: int
    key: str
    #: The tick partition this state belongs to, and the first tick offset NOT inside it.
    partition: int
    offset: int
    #: Event time of the token's newest tick, for the live clock after a restore.
    last_event_ts: float | None
    #: Wall-clock time of the checkpoint (unix seconds); for operators.
    written_at: float
    #: Whether the token had no tick for ``model.stale_after_seconds`` of wall time.
    stale: bool
    #: ``Engine.export_state(key)``.
    engine_state: bytes


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(StateRecord)


def encode_state(record: StateRecord) -> bytes:
    """The wire form: always the current version, engine state deflated."""
    wire = msgspec.structs.replace(record, version=STATE_VERSION,
                                   engine_state=zlib.compress(record.engine_state,
                                                              _DEFLATE_LEVEL))
    return _encoder.encode(wire)


def decode_state(raw: bytes) -> StateRecord:
    """Any version's wire form -> a record holding the engine state as exported.

    Raises ``msgspec.DecodeError`` for a record that is not a state (or whose engine state
    does not inflate)."""
    record = _decoder.decode(raw)
    if record.version < 2:
        return record
    try:
        blob = zlib.decompress(record.engine_state)
    except zlib.error as exc:
        raise msgspec.DecodeError(f"state of {record.key!r}: engine state does not "
                                  f"inflate ({exc})") from exc
    return msgspec.structs.replace(record, engine_state=blob)


async def read_states(
    make_reader: Callable[[], AIOKafkaConsumer], topic: str, partitions: list[int],
    fetch_max_records: int = 5000,
) -> dict[int, dict[str, StateRecord]]:
    """The newest state record per token in each of ``partitions`` of the state topic.

    Reads each partition from its beginning to its TRUE end (the fetch high watermark,
    ``monitor.kafka.readall``; never one ``end_offsets`` answer, which on the embedded
    broker stops short of the newest checkpoints). Real Kafka has compacted most of it;
    the embedded broker does not compact, so this grows with the number of checkpoints
    there. Undecodable records are logged and skipped: the token then starts from its
    ticks, which is better than not starting at all.
    """
    found: dict[int, dict[str, StateRecord]] = {p: {} for p in partitions}
    if not partitions:
        return found

    def keep(tp: TopicPartition, records: list[Any]) -> None:
        for rec in records:
            if rec.value is None:
                continue
            try:
                state = decode_state(rec.value)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.error("state.undecodable", partition=tp.partition,
                          offset=rec.offset, error=str(exc)[:200])
                continue
            if state.partition != tp.partition:
                continue
            # Every record is exact at its own offset, so the furthest one wins (not
            # merely the last written: a fenced-off instance may still finish writing
            # older states after the new owner wrote newer ones).
            known = found[tp.partition].get(state.key)
            if known is None or state.offset >= known.offset:
                found[tp.partition][state.key] = state

    reader = make_reader()
    await reader.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        reader.assign(tps)
        await reader.seek_to_beginning(*tps)
        await read_to_end(reader, tps, keep, fetch_max_records=fetch_max_records)
    finally:
        await reader.stop()
    return found
