"""``depeg-monitor store``: the command line of the store writer (consumers/store_writer.py).

Apart from the writer so that ``depeg-monitor store --help`` does not import aiokafka,
asyncpg and the rest of its stack: the writer is imported when the command runs
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
    from monitor.logs import get_logger
    from monitor.services import run_until_signalled

    from .store_writer import run_store_writer

    log = get_logger("consumers.store_writer")
    config = with_bootstrap_servers(config, args.bootstrap_servers)
    try:
        return run_until_signalled(run_store_writer, config)
    except RuntimeError as exc:
        log.error("store_writer.failed", error=str(exc))
        return 1


command = Command(
    "store", "write ratings, tier changes and vault facts/ratings from Kafka into the database",
    _add_arguments, _run,
    description=("Consumes the ratings and tier-change topics and the vault facts and "
                 "ratings topics (group kafka.store_group) into storage.url in batches, "
                 "committing offsets after each database write. Deletes history older than "
                 "storage.retention_days (vault rating history: 90 days) every hour."),
)
