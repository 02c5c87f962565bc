"""``depeg-monitor spread``: the command line of the spread stage (monitor/spread/service.py).

Apart from the service so that ``depeg-monitor spread --help`` does not import aiokafka
and the engines: the service is imported when the command runs (benchmarks/bench_cli.py).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..commands import Command, add_bootstrap_servers, with_bootstrap_servers

if TYPE_CHECKING:
    from ..config import Config

DESCRIPTION = """\
Read every chain's ticks from the ticks topic and publish, at every refresh boundary of
event time, one cross-chain spread observation per token of each asset listed on two or
more chains in the token registry (registry.path, `asset` ids), into that token's own key
on the ticks topic. The monitor's headroom signal uses it next to oracle divergence, and
waits for it, so ratings stay byte-identical to `depeg-monitor replay`.
Settings: [spread] enabled, price_max_age_seconds, quiet_after_seconds, state_topic;
[kafka] as for the monitor. Run one instance. SIGTERM/Ctrl-C: outputs acknowledged, state
written, then exit. docs/cross-chain-spread.md explains the design.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    add_bootstrap_servers(parser)


def run_command(args: argparse.Namespace, config: Config) -> int:
    from ..services import run_broker_service
    from .service import run_service

    config = with_bootstrap_servers(config, getattr(args, "bootstrap_servers", None))
    return run_broker_service("spread", run_service, config)


command = Command(
    name="spread",
    help="run the cross-chain spread stage: every chain's ticks in, spread observations out",
    add_arguments=add_arguments,
    run=run_command,
    description=DESCRIPTION,
)
