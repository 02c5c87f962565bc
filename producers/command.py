"""``depeg-monitor produce``: one command, a sub-command per kind of producer."""

from __future__ import annotations

import argparse

from monitor.commands import Command
from monitor.config import Config

from . import chain_cmd, replay, simulate, uniswap, vaults

_SUBCOMMANDS = {
    "replay": (replay, "publish canonical tick files (CSV/JSONL) in event-time order"),
    "simulate": (simulate, "generate synthetic tokens (calm, depeg, collapse, premium, "
                           "liquidity drain) for demos and load"),
    "uniswap": (uniswap, "turn Uniswap v3 pool state into slippage_bps ticks"),
    "chain": (chain_cmd, "poll oracles, Uniswap v3 pools, peg feeds and vaults over JSON-RPC"),
    "vaults": (vaults, "publish vault facts: fact files, or `vaults simulate --vaults N`"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="producer", metavar="PRODUCER", required=True)
    for name, (module, help_text) in _SUBCOMMANDS.items():
        child = sub.add_parser(name, help=help_text, description=module.DESCRIPTION)
        module.add_arguments(child)


def run(args: argparse.Namespace, config: Config) -> int:
    module, _ = _SUBCOMMANDS[args.producer]
    result: int = module.run(args, config)
    return result


command = Command(
    name="produce",
    help=("publish to Kafka: tick files, simulated tokens, Uniswap v3, on-chain adapters "
         "(chain), vault facts (vaults)"),
    add_arguments=add_arguments,
    run=run,
    description=(
        "Producers feed kafka.ticks_topic (default depeg.ticks) with the tick JSON the monitor "
        "reads, keyed chain:token. They need a running broker (--bootstrap-servers or "
        "DEPEG_KAFKA__BOOTSTRAP_SERVERS) and create missing topics with kafka.partitions."
    ),
)
