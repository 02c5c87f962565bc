"""The shape of a ``depeg-monitor`` subcommand.

Subcommands are found through the ``depeg_monitor.commands`` entry-point group, so the
delivery worker (``consumers/``) and the producers (``producers/``) plug into the one CLI
without ``monitor`` importing them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

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
