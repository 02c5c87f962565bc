"""``depeg-monitor monitor`` (the daemon alone) and its :class:`Service` for ``run``.

The daemon (aiokafka, the engines) is imported when it starts, not with this module:
``depeg-monitor monitor --help`` stays fast (benchmarks/bench_cli.py).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

import msgspec

from ..commands import Command, add_bootstrap_servers, with_bootstrap_servers
from ..services import Service

if TYPE_CHECKING:
    from ..config import Config

DESCRIPTION = """\
Consume ticks from the ticks topic, rate every token, publish rating snapshots and tier
changes, and keep each token's state on a compacted state topic so a restart or a
rebalance continues exactly where it stopped. Run several with the same group to split the
partitions. SIGTERM/Ctrl-C: the batch in flight finishes, states are written, offsets
committed.

Settings ([kafka] section of the config file, or DEPEG_KAFKA__<FIELD> variables):
  bootstrap_servers            broker list (required here; `run` can start its own)
  ticks_topic, ratings_topic, tier_changes_topic, dlq_topic, state_topic
  partitions, replication_factor, create_topics   topics created at start if missing
  monitor_group                consumer group; instances in one group split partitions
  batch_max_records, batch_timeout_ms             one getmany batch
  checkpoint_interval_seconds  state writes + offset commits at most this often
  state_every_ticks, state_max_age_seconds   a token's state is written when it has this
                               many ticks not in its last state, or the first is this old
  compression                  output batches: zstd (default), lz4, snappy, gzip, none
  acks, linger_ms, request_timeout_ms, session_timeout_ms, heartbeat_interval_ms
  producer_batch_bytes         largest record batch per partition the producer builds
  retry_backoff_seconds, retry_backoff_max_seconds   broker retries (forever)
  ready_stall_seconds          /readyz fails when a batch is stuck this long
  live_clock_interval_seconds  how often quiet tokens are refreshed (wall clock)
  dlq_value_prefix_bytes       bytes of a bad record kept in its dead letter
  shutdown_grace_seconds       how long a stop waits for an unreachable broker
The rating model is [model] (model.stale_after_seconds: a token without ticks for that
long of wall time is stale and refreshed by the live clock). /metrics, /healthz and
/readyz listen on [metrics] host:port (port 0: any free port, logged).
`depeg-monitor config --defaults` prints every setting.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_bootstrap_servers(parser)
    parser.add_argument("--group", metavar="NAME",
                        help="consumer group (overrides kafka.monitor_group)")


def apply_overrides(config: Config, args: argparse.Namespace) -> Config:
    config = with_bootstrap_servers(config, getattr(args, "bootstrap_servers", None))
    kafka = config.kafka
    if getattr(args, "group", None):
        kafka = msgspec.structs.replace(kafka, monitor_group=args.group)
    return msgspec.structs.replace(config, kafka=kafka)


def run_command(args: argparse.Namespace, config: Config) -> int:
    from ..logs import get_logger
    from ..services import run_broker_service
    from .lost import BrokerLost

    try:
        return run_broker_service("monitor", run_service, apply_overrides(config, args))
    except BrokerLost as exc:
        get_logger(__name__).error("monitor.exit_broker_lost", error=str(exc))
        return 3


async def run_service(config: Config, stop: asyncio.Event) -> None:
    from .ingest import MonitorDaemon

    await MonitorDaemon(config).run(stop)


command = Command(
    name="monitor",
    help="run the monitor daemon: ticks in, ratings and tier changes out (Kafka)",
    add_arguments=add_arguments,
    run=run_command,
    description=DESCRIPTION,
)

service = Service(name="monitor", run=run_service, order=10)
