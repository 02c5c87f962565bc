"""``depeg-monitor produce``: one command, a sub-command per kind of producer.

Each producer's module (aiokafka, aiohttp, the chain adapters' eth-abi: most of a second
to import) is imported when that producer is chosen, not to build ``produce``'s parser:
``depeg-monitor produce --help`` lists them from the table below.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from monitor.commands import Command

if TYPE_CHECKING:
    from monitor.config import Config

#: Producer name -> (its module, its one-line help).
_SUBCOMMANDS = {
    "replay": ("producers.replay",
               "publish canonical tick files (CSV/JSONL) in event-time order"),
    "simulate": ("producers.simulate", "generate synthetic tokens (calm, depeg, collapse, "
                                       "premium, liquidity drain) for demos and load"),
    "uniswap": ("producers.uniswap", "turn Uniswap v3 pool state into slippage_bps ticks"),
    "chain": ("producers.chain_cmd",
              "poll oracles, Uniswap v3 pools, peg feeds and vaults over JSON-RPC"),
    "vaults": ("producers.vaults",
               "publish vault facts: fact files, or `vaults simulate --vaults N`"),
}


#: The producers' names, in the order ``produce --help`` lists them.
PRODUCERS = tuple(_SUBCOMMANDS)


def _module(name: str) -> Any:
    return importlib.import_module(_SUBCOMMANDS[name][0])


class _ProducerChoice(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The producer sub-parsers, each given its module's description and options when it
    is chosen (before it parses the rest of the line, so its ``--help`` and its usage
    errors are what the eagerly built parser printed)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        assert isinstance(values, list) and values
        child = self._name_parser_map.get(values[0])
        if child is not None and child.description is None:
            module = _module(values[0])
            child.description = module.DESCRIPTION
            module.add_arguments(child)
        super().__call__(parser, namespace, values, option_string)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="producer", metavar="PRODUCER", required=True,
                                action=_ProducerChoice)
    for name, (_, help_text) in _SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text)


def run(args: argparse.Namespace, config: Config) -> int:
    result: int = _module(args.producer).run(args, config)
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
