"""The shape of a ``depeg-monitor`` subcommand.

Subcommands are found through the ``depeg_monitor.commands`` entry-point group, so the
delivery worker (``consumers/``) and the producers (``producers/``) plug into the one CLI
without ``monitor`` importing them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported when a command runs, not to list the commands (start-up time)
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


def bootstrap_servers_value(text: str) -> str:
    """``HOST:PORT[,HOST:PORT...]`` checked, so a pasted placeholder (``127.0.0.1:PORT``)
    is a usage error naming the problem instead of a traceback from the Kafka client."""
    entries = [e.strip() for e in text.split(",")]
    for entry in entries:
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise argparse.ArgumentTypeError(
                f"{entry!r} is not HOST:PORT (PORT a number 1-65535). A running "
                "`depeg-monitor run` on this machine is found without this option; "
                "otherwise use the address it logs (run.embedded_broker)")
    return ",".join(entries)


def add_bootstrap_servers(parser: argparse.ArgumentParser,
                          help: str = "Kafka brokers (overrides kafka.bootstrap_servers)") -> None:
    """The ``--bootstrap-servers`` option every Kafka-facing command shares."""
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT[,...]", help=help,
                        type=bootstrap_servers_value)


def with_bootstrap_servers(config: Config, servers: str | None, *,
                           discover: bool = True) -> Config:
    """``config`` with ``kafka.bootstrap_servers`` replaced when ``servers`` is given;
    with neither, and ``discover``, the broker of a ``run`` on this machine (its state
    file, monitor/runstate.py)."""
    if not servers and not config.kafka.bootstrap_servers and discover:
        from .runstate import discover_bootstrap

        servers = discover_bootstrap(config)
    if not servers:
        return config
    import msgspec

    kafka = msgspec.structs.replace(config.kafka, bootstrap_servers=servers)
    return msgspec.structs.replace(config, kafka=kafka)
