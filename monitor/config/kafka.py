"""The ``[kafka]`` section: brokers, topics, groups, batching and checkpoint cadences.

Every consuming service (monitor, spread stage, vault daemon, store writer, delivery) and
every producer reads it, so the topic names and the recovery cadences are set in one place.
"""

from __future__ import annotations

from typing import Literal

import msgspec


class KafkaConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    #: Empty: ``run`` starts the embedded Tansu broker on loopback.
    bootstrap_servers: str = ""
    ticks_topic: str = "depeg.ticks"
    ratings_topic: str = "depeg.ratings"
    tier_changes_topic: str = "depeg.tier-changes"
    dlq_topic: str = "depeg.ticks.dlq"
    #: Compacted: the latest engine state of each token, keyed ``chain:token``, written to
    #: the same partition number as the token's ticks (so it needs >= ``partitions``).
    state_topic: str = "depeg.monitor-state"
    #: Partitions of every topic the monitor creates; the unit of scale-out.
    partitions: int = 8
    replication_factor: int = 1
    #: Create missing topics at start (idempotent). Off when topics are managed elsewhere.
    create_topics: bool = True
    client_id: str = "depeg-monitor"
    monitor_group: str = "depeg-monitor"
    delivery_group: str = "depeg-delivery"
    store_group: str = "depeg-store"
    #: One batch = at most this many tick records, or what arrived within the timeout.
    batch_max_records: int = 2000
    batch_timeout_ms: int = 200
    #: Producer acknowledgements: "all" (default), "1" or "0". Never idempotent: the
    #: embedded broker refuses InitProducerId.
    acks: str = "all"
    #: Compression of every record batch this service produces: "zstd" (default), "lz4",
    #: "snappy", "gzip" or "none". Rating snapshots and state records are JSON that zstd
    #: shrinks ~8x; every current Kafka client reads zstd batches (Kafka >= 2.1, librdkafka
    #: >= 1.0; Python clients need cramjam, as aiokafka here does). "none" for a consumer
    #: that cannot decompress.
    compression: Literal["zstd", "lz4", "snappy", "gzip", "none"] = "zstd"
    linger_ms: int = 5
    #: Largest record batch the producer builds per partition. A whole fetched batch's
    #: outputs fit in one (at 16 KB, aiokafka's default, the loop waited for a broker
    #: round trip every ~8 rating snapshots per partition). Keep it within the broker's
    #: message.max.bytes (Kafka's default: 1 MB).
    producer_batch_bytes: int = 524288
    #: This and the three below apply to every consumer of the service: the monitor's,
    #: the delivery worker's and the store writer's. A group holding a killed member's
    #: partitions waits session_timeout_ms before it gives them to another.
    request_timeout_ms: int = 30000
    session_timeout_ms: int = 10000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 300000
    #: Port of the embedded broker ``run`` starts. Fixed, so a demo's second terminal
    #: (``produce``, ``status``) knows it; not 9092, which a real Kafka on the same machine
    #: may hold. 0 = any free port (tests); the run state file records the real one.
    embedded_port: int = 19092
    #: A dead-lettered record keeps at most this many bytes of the original value.
    dlq_value_prefix_bytes: int = 1024
    #: Broker failures are retried forever with exponential backoff between these bounds.
    retry_backoff_seconds: float = 0.5
    retry_backoff_max_seconds: float = 10.0
    #: The monitor reports not ready when a batch has been stuck this long.
    ready_stall_seconds: float = 15.0
    #: /healthz fails (the process is stuck, not just waiting) when the monitor loop has
    #: not started an iteration for this long: a hung rebalance, restore or publish.
    liveness_stall_seconds: float = 300.0
    #: Token states are written to the state topic, and offsets committed after them, at
    #: most this often (wall clock); also on partition revocation and shutdown. Outputs are
    #: published every batch regardless; a crash re-produces what came after the commit
    #: (see ``state_max_age_seconds``).
    checkpoint_interval_seconds: float = 5.0
    #: A monitor checkpoint writes a token's state (a ~1.8 KB ring, rewritten whole) only
    #: when it is due: this many ticks since its last written state, or
    #: ``state_max_age_seconds`` (wall clock) since the first of them; every changed token
    #: on revocation and shutdown (the vault daemon writes at every checkpoint). The
    #: committed offset stops at the first tick no written state holds, so a kill -9
    #: re-reads (and re-publishes, byte-identical) up to that much of a partition. Lower
    #: both for shorter re-reads, at the price of state bytes: at one tick per token per
    #: minute, 900 s keeps the state and ratings topics under the ticks topic's bytes
    #: (docs/recovery.md, "Cadences").
    state_every_ticks: int = 32
    state_max_age_seconds: float = 900.0
    #: How often (wall clock) quiet tokens are checked for a live-clock refresh.
    live_clock_interval_seconds: float = 10.0
    #: On SIGTERM, give an in-flight batch this long to publish and commit.
    shutdown_grace_seconds: float = 30.0

    def __post_init__(self) -> None:
        if self.state_every_ticks < 1 or self.state_max_age_seconds < 0:
            raise ValueError("kafka.state_every_ticks must be >= 1 and "
                             "state_max_age_seconds >= 0")
