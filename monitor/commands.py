"""The shape of a ``depeg-monitor`` subcommand.

Subcommands are found through the ``depeg_monitor.commands`` entry-point group, so the
delivery worker (``consumers/``) and the producers (``producers/``) plug into the one CLI
without ``monitor`` importing them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a command runs, not to list the commands (start-up time)
    from .config import Config


#: Command's fields in their constructor's order (``__slots__`` is sorted).
_FIELDS = ("name", "help", "add_arguments", "run", "description")


class Command:
    """A subcommand, immutable, compared and hashed by its fields. Written out rather than
    a frozen dataclass: every process starts by importing this class, and a dataclass
    compiles its generated methods at each start (~4.5 M instructions, more than the
    rest of this module)."""

    __slots__ = ("add_arguments", "description", "help", "name", "run")

    name: str
    help: str
    #: Adds the subcommand's own arguments (its --help is generated from them).
    add_arguments: Callable[[argparse.ArgumentParser], None]
    #: Runs it; returns the process exit code.
    run: Callable[[argparse.Namespace, Config], int]
    description: str

    def __init__(self, name: str, help: str,
                 add_arguments: Callable[[argparse.ArgumentParser], None],
                 run: Callable[[argparse.Namespace, Config], int],
                 description: str = "") -> None:
        for field, value in zip(_FIELDS, (name, help, add_arguments, run, description),
                                strict=True):
            object.__setattr__(self, field, value)

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, field) for field in _FIELDS)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Command) and other.__class__ is self.__class__:
            return self._fields() == other._fields()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        shown = ", ".join(f"{field}={getattr(self, field)!r}" for field in _FIELDS)
        return f"{type(self).__qualname__}({shown})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")


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
