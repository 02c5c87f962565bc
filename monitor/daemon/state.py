"""Token state on the compacted state topic: what a restarted or rebalanced instance resumes.

One record per token whenever a checkpoint finds it due (``coverage.py``), keyed
``chain:token`` and written to the *same partition number* as the token's ticks, so an
instance that is assigned tick partition ``p`` reads exactly state partition ``p``. A
record says: "this engine state contains every tick of this token at offsets below
``offset`` of tick partition ``partition``, and none at or above it". That sentence is
what makes recovery exact:

- the consumer resumes each partition at its committed offset ``C``; a checkpoint writes
  the states (and waits for the broker) *before* it commits, and commits no further than
  the partition's first tick that no written state holds (``coverage.py``: tokens' states
  are written when due, not at every checkpoint), so every tick below ``C`` is inside its
  own token's state record;
- a state record may be newer than ``C``: routinely, a busy token's state was due and
  written while a quiet token's first unwritten tick holds ``C`` back (and after a crash
  between writing states and committing). The ingest loop then skips that token's ticks
  below the record's ``offset``, because the state already holds them, and processes the
  rest. A token whose record is at or below ``C`` has no tick between its ``offset`` and
  ``C`` (such a tick would be unwritten and below ``C``), so processing every one of its
  ticks from ``C`` on is exactly what its state lacks. Outputs between ``C`` and the crash
  are re-produced byte for byte with the same event ids (up to
  ``kafka.state_max_age_seconds`` plus a checkpoint interval of them);
- compact records (version 2) leave out the ticks the engine still holds for lateness
  (``lateness_seconds`` of them: at one tick a second they were 85% of the record, and
  grew with tick density) and list their offsets instead, ``pending_offsets``. The
  restore seeks the partition back to the lowest such offset, below ``C``, and below ``C``
  processes exactly those offsets (in offset order, as first received, so the engine
  holds and releases them exactly as before), nothing else: no output nor dead letter is
  made twice for them. The group's committed offset never moves back. Listed offsets
  count as covered for the commit rule (the restore reads them again); a token's listed
  offsets may lie above ``C`` when its record is newer than ``C``: they are processed
  there like any tick the record does not hold, and its other ticks below its ``offset``
  skipped.

On the wire (version 2) the engine state is also deflated (``zlib``, stdlib): it is msgpack
of a bucket ring (mostly repeated or empty floats), so a token's record shrinks from
5.1 KB to about 1.9 KB, at any tick rate (it held 33 KB at one tick a second before).
Version 1 records (engine state as is, held ticks inside) still load. In memory a
:class:`StateRecord` always holds the engine state as ``Engine.export_state`` made it.

Never ``offsets_for_times``: it is wrong on the embedded broker (DESIGN.md).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, TopicPartition

from ..kafka.closing import close_bounded
from ..kafka.readall import read_from_start
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
    #: ``Engine.export_state(key)``; without the ticks held for lateness when
    #: ``pending_offsets`` lists them.
    engine_state: bytes
    #: Offsets (tick partition ``partition``, all below ``offset``) of the token's ticks
    #: held for lateness at the checkpoint and left OUT of ``engine_state``: a restore
    #: reads them again from the ticks topic. Added in version 2 (trailing, default empty:
    #: a version 1 state holds its held ticks itself).
    pending_offsets: list[int] = msgspec.field(default_factory=list)


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
        await read_from_start(reader, [TopicPartition(topic, p) for p in partitions], keep,
                              fetch_max_records=fetch_max_records)
    finally:
        await close_bounded(reader.stop(), "reader_stop", "state.close_failed")
    return found
