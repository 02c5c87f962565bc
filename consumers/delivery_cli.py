"""``depeg-monitor deliver``: the command line of the delivery worker (consumers/delivery.py).

Apart from the worker so that ``depeg-monitor deliver --help`` does not import aiokafka,
aiohttp and the database drivers: the worker is imported when the command runs
(benchmarks/bench_cli.py).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from monitor.commands import Command, add_bootstrap_servers, with_bootstrap_servers

if TYPE_CHECKING:
    from monitor.config import Config


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_servers(parser)


def _run(args: argparse.Namespace, config: Config) -> int:
    from monitor.services import run_broker_service

    from .delivery import run_worker

    config = with_bootstrap_servers(config, args.bootstrap_servers)
    # Without a broker: exit 2 naming the setting, as the other daemons (it used to try
    # 127.0.0.1:9092 and exit 1 on aiokafka's own connection error, which names none).
    return run_broker_service("delivery", run_worker, config)


command = Command(
    name="deliver",
    help="deliver tier changes to webhook subscriptions (signed, with retries)",
    add_arguments=_add_arguments,
    run=_run,
    description=(
        "Consumes kafka.tier_changes_topic in consumer group kafka.delivery_group, records "
        "one delivery per matching subscription and event in storage.url, and POSTs them "
        "signed, retrying with backoff up to delivery.max_attempts. Stops cleanly on SIGTERM."
    ),
)
