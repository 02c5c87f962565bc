"""Which partition a keyed record goes to: the producer's own default partitioner, cached.

Records handed to the producer as whole record batches (``Publisher.send_all``) need their
partition up front. It is the one ``AIOKafkaProducer.send`` would pick (aiokafka's
``DefaultPartitioner``: Java's murmur2 of the key over the topic's partitions), so a key's
records land where they always did; the hash is pure Python (~10 µs), so each key's is
computed once per partition count.
"""

from __future__ import annotations

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner


class KeyPartitions:
    def __init__(self, producer: AIOKafkaProducer) -> None:
        self._producer = producer
        self._partitioner = DefaultPartitioner()
        #: topic -> (its partitions as the producer lists them, key -> partition)
        self._cache: dict[str, tuple[list[int], dict[bytes, int]]] = {}

    async def mapper(self, topic: str) -> dict[bytes, int] | None:
        """The key -> partition cache of ``topic`` for keys seen so far (None when the
        producer knows no partitions for it); ``of`` fills it."""
        # The producer's metadata (refreshed by aiokafka): a change in the partition count
        # starts a new cache, as the producer's own choice would change with it.
        partitions = await self._producer.partitions_for(topic)
        if not partitions:
            return None
        cached = self._cache.get(topic)
        if cached is None or len(cached[0]) != len(partitions):
            # The list aiokafka's own _partition hands its partitioner.
            cached = self._cache[topic] = (list(partitions), {})
        return cached[1]

    def of(self, topic: str, key: bytes, known: dict[bytes, int]) -> int:
        """The partition of ``key``; ``known`` is ``mapper(topic)``'s cache."""
        partition = known.get(key)
        if partition is None:
            all_partitions = self._cache[topic][0]
            partition = known[key] = self._partitioner(key, all_partitions, all_partitions)
        return partition
