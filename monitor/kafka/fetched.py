"""Fetched records as small msgspec structs instead of aiokafka's ``ConsumerRecord``.

For every record it hands out, aiokafka builds an 11-field ``ConsumerRecord`` dataclass in
Python: ~0.6 µs a record (``benchmarks/bench_fetched.py``), a tenth to a fifth of what a
bare decode-only consumer spends on a tick (docs/performance.md, nineteenth pass). The
daemons read only the record's topic, partition, offset, timestamp, key, value and
headers. A consumer made with ``value_deserializer=fetched_value`` (``make_consumer``
does) gets :class:`FetchedRecord` instead. msgspec builds it in C, with the same field
names and values.

Only the record object changes. Everything else in the fetch is still aiokafka's own code:
positions, control batches, aborted transactions, CRC checks and compacted offsets. This
module swaps the fetcher's ``PartitionRecords`` for a factory. The factory makes
aiokafka's class for every other consumer, and for ours a subclass that overrides only
``_consumer_record``. That method is private API. When the installed aiokafka does not
have the shape this relies on, nothing is swapped and consumers get ``ConsumerRecord`` as
before (``fetched_value`` is then an ordinary identity deserializer). tests/kafka/test_fetched.py
fails loudly in that case, so an upgrade cannot make the monitor slower without anyone
noticing.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..logs import get_logger

log = get_logger(__name__)


#: A record a consumer hands out: a :class:`FetchedRecord`, or aiokafka's untyped
#: ``ConsumerRecord`` (when the swap is unavailable, or a deserializer was asked for).
Record = Any


class FetchedRecord(msgspec.Struct, gc=False):
    """A fetched record, with ``aiokafka.structs.ConsumerRecord``'s names for the fields
    the daemons read. ``gc=False``: it holds only strings, numbers, bytes and a tuple of
    (str, bytes) tuples, so it can never be part of a reference cycle."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


def fetched_value(value: bytes | None) -> bytes | None:
    """The value deserializer that asks for :class:`FetchedRecord`s. It returns the value
    unchanged; it is recognised by identity, never called when the swap is in place. A
    FetchedRecord applies no deserializer, so never pair it with a key deserializer."""
    return value


_installed: bool | None = None  # None: not tried yet


def install() -> bool:
    """Swap the fetcher's record factory once per process. Returns True when consumers
    made with ``fetched_value`` get :class:`FetchedRecord`s."""
    global _installed
    if _installed is None:
        _installed = _swap()
    return _installed


def _swap() -> bool:
    import inspect  # here, not at import: ~8 ms that a CLI start need not load

    from aiokafka.consumer import fetcher

    original = fetcher.PartitionRecords
    if getattr(original, "_fetched_factory", False):
        return True  # swapped already (the module reloaded)
    method = getattr(original, "_consumer_record", None)
    if not inspect.isclass(original) or method is None or \
            list(inspect.signature(method).parameters) != ["self", "tp", "record"]:
        log.warning("kafka.fetched_records_unavailable",
                    reason="aiokafka's PartitionRecords changed shape; records stay ConsumerRecord")
        return False

    class Lean(original):  # type: ignore[misc, valid-type]
        """aiokafka's PartitionRecords with a small record built per record."""

        def _consumer_record(self, tp: Any, record: Any) -> FetchedRecord:
            headers = record.headers
            return FetchedRecord(tp.topic, tp.partition, record.offset, record.timestamp,
                                 record.timestamp_type, record.key, record.value,
                                 tuple(headers) if headers else ())

    def partition_records(*args: Any, **kwargs: Any) -> Any:
        # The value deserializer is one of the arguments: found by identity, wherever
        # aiokafka passes it.
        lean = any(a is fetched_value for a in args) or \
            any(a is fetched_value for a in kwargs.values())
        return (Lean if lean else original)(*args, **kwargs)

    partition_records._fetched_factory = True  # type: ignore[attr-defined]
    fetcher.PartitionRecords = partition_records
    return True


__all__ = ["FetchedRecord", "fetched_value", "install"]
