"""The shape of a ``depeg-monitor`` subcommand.

Subcommands are found through the ``depeg_monitor.commands`` entry-point group, so the
delivery worker (``consumers/``) and the producers (``producers/``) plug into the one CLI
without ``monitor`` importing them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from .config import Config


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    #: Adds the subcommand's own arguments (its --help is generated from them).
    add_arguments: Callable[[argparse.ArgumentParser], None]
    #: Runs it; returns the process exit code.
    run: Callable[[argparse.Namespace, Config], int]
    description: str = ""


def add_bootstrap_servers(parser: argparse.ArgumentParser,
                          help: str = "Kafka brokers (overrides kafka.bootstrap_servers)") -> None:
    """The ``--bootstrap-servers`` option every Kafka-facing command shares."""
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT[,...]", help=help)


def with_bootstrap_servers(config: Config, servers: str | None) -> Config:
    """``config`` with ``kafka.bootstrap_servers`` replaced when ``servers`` is given."""
    if not servers:
        return config
    kafka = msgspec.structs.replace(config.kafka, bootstrap_servers=servers)
    return msgspec.structs.replace(config, kafka=kafka)
