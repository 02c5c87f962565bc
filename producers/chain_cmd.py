"""`depeg-monitor produce chain`: the on-chain adapters alone (the `chain` service of `run`
is :mod:`producers.chain_service`).

The adapters' stack (eth-abi, aiohttp, aiokafka: ~0.5 s), asyncio and the logging stack are
imported where a run needs them, so `produce chain --help` answers as fast as the other
producers' help.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from monitor.chains import CHAINS

from .options import add_kafka_arguments

if TYPE_CHECKING:
    import asyncio

    from monitor.config import Config

DESCRIPTION = """Poll Chainlink-style oracles, Uniswap v3 pools, peg feeds, ERC-4626 NAVs and vaults
on every chain with chains.<chain>.rpc_urls, and publish ticks (kafka.ticks_topic) and vault
facts (vaults.facts_topic). What to watch: the Token List in chains.tokens_file (or
registry.path) with extensions.sources, and chains.vaults_file. See docs/chain-adapters.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--chain", choices=CHAINS, help="poll only this chain")
    parser.add_argument("--once", action="store_true", help="one poll per chain, then exit")
    parser.add_argument("--backfill-blocks", type=int, default=0, metavar="N",
                        help="first publish the oracle history (AnswerUpdated logs) of the "
                             "last N blocks as oracle_price_usd ticks")
    add_kafka_arguments(parser)


async def serve(config: Config, stop: asyncio.Event, *, chain: str | None = None,
                 once: bool = False, bootstrap: str | None = None, backfill: int = 0) -> int:
    from monitor.logs import get_logger

    from .chainsvc import Publisher, build_pollers, run_pollers
    from .kafka_out import bootstrap_from

    pollers = build_pollers(config, chain)
    if not pollers:
        get_logger(__name__).info("chain.idle", reason="no chain has rpc_urls configured")
        return 0
    publisher = Publisher(config, bootstrap_from(bootstrap, config.kafka))
    await publisher.start()
    try:
        return await run_pollers(pollers, publisher, stop, once=once, backfill_blocks=backfill)
    finally:
        await publisher.close()


def run(args: argparse.Namespace, config: Config) -> int:
    import asyncio

    from monitor.services import run_until_signalled
    from monitor.tokenlist import CHAIN_BY_ID

    from .chainsvc import SourcesError
    from .kafka_out import ProduceError

    try:
        if not any(config.chains.chain(c).urls
                   for c in ((args.chain,) if args.chain else CHAIN_BY_ID.values())):
            # Run alone, idling (as the service of ``run`` does) would exit 0 having done
            # nothing: say what to configure instead.
            where = f" for {args.chain}" if args.chain else ""
            print(f"depeg-monitor produce chain: no chain has rpc_urls configured{where}; set "
                  "chains.<chain>.rpc_urls (for example DEPEG_CHAINS__ETH__RPC_URLS="
                  "https://a,https://b), see docs/chain-adapters.md", file=sys.stderr)
            return 2
        if args.once:
            async def once() -> int:
                return await serve(config, asyncio.Event(), chain=args.chain, once=True,
                                   bootstrap=args.bootstrap_servers,
                                   backfill=args.backfill_blocks)

            failures = asyncio.run(once())
            return 1 if failures else 0

        async def forever(cfg: Config, stop: asyncio.Event) -> None:
            await serve(cfg, stop, chain=args.chain, bootstrap=args.bootstrap_servers,
                        backfill=args.backfill_blocks)

        return run_until_signalled(forever, config)
    except (SourcesError, ProduceError) as exc:
        print(f"depeg-monitor produce chain: {exc}", file=sys.stderr)
        # A bad sources file is configuration (2); a ProduceError says which it is.
        return exc.exit_code if isinstance(exc, ProduceError) else 2

