"""What a topic costs the broker: its record batches as the broker serves them.

A consumer sees records after decompression, so summing record sizes says nothing about
``kafka.compression``. This reads a topic with raw Fetch requests and walks the record
batch headers (Kafka's v2 batch format: base offset, length, attributes, last offset
delta), counting each batch's bytes and codec. Benchmarks use it for the bytes-per-tick
figure and tests use it to check the codec really reaches the broker.
"""

from __future__ import annotations

import struct

import msgspec
from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.structs import TopicPartition

#: Codec numbers of the batch attributes' low 3 bits (Kafka protocol).
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_HEADER = 61  # bytes of a v2 record batch header
_FETCH_BYTES = 8 << 20


class BatchTally(msgspec.Struct, frozen=True):
    """Batches, their bytes on the broker, their records, and the codecs seen."""
    batches: int
    bytes: int
    records: int
    codecs: frozenset[str]


def tally_batches(data: bytes, start: int) -> tuple[int, int, int, set[int], int]:
    """(batches, bytes, records, codecs, next offset) of the whole batches in one fetched
    ``records`` blob. A fetch may end inside a batch, and may begin before ``start`` (a
    batch is served whole): the cut batch is left for the next fetch and records before
    ``start`` are not counted twice."""
    pos = batches = size = records = 0
    codecs: set[int] = set()
    offset = start
    while pos + _HEADER <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            break
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        (count,) = struct.unpack_from(">i", data, pos + 57)
        if base + last_delta >= offset:
            batches += 1
            size += 12 + length
            records += count
            codecs.add(attributes & 7)
            offset = base + last_delta + 1
        pos += 12 + length
    return batches, size, records, codecs, offset


async def stored_batches(bootstrap_servers: str, topic: str) -> BatchTally:
    """Every partition of ``topic`` read from its first offset to its end."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap_servers)
    await client.bootstrap()
    batches = size = records = 0
    codecs: set[int] = set()
    try:
        await client.force_metadata_update()
        for partition in sorted(client.cluster.partitions_for_topic(topic) or ()):
            node = client.cluster.leader_for_partition(TopicPartition(topic, partition))
            offset = 0
            while True:
                request = FetchRequest(100, 1, _FETCH_BYTES, 0,
                                       [(topic, [(partition, offset, _FETCH_BYTES)])])
                response = await client.send(node, request)
                data = response.topics[0][1][0][-1] or b""
                got = tally_batches(bytes(data), offset)
                if got[4] == offset:  # nothing whole past ``offset``: the end
                    break
                batches, size, records = batches + got[0], size + got[1], records + got[2]
                codecs |= got[3]
                offset = got[4]
    finally:
        await client.close()
    return BatchTally(batches, size, records, frozenset(CODECS.get(c, str(c)) for c in codecs))


__all__ = ["CODECS", "BatchTally", "stored_batches", "tally_batches"]
