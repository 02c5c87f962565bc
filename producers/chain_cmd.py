"""`depeg-monitor produce chain`: the on-chain adapters alone; the `chain` service of `run`.

The adapters' stack (eth-abi, aiohttp, aiokafka: ~0.5 s) is imported where a run needs
it, so `produce chain --help` answers as fast as the other producers' help.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from monitor.chains import CHAINS
from monitor.config import Config
from monitor.logs import get_logger
from monitor.services import Service, StartupError, run_until_signalled

from .publish import add_kafka_arguments

log = get_logger(__name__)

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


async def _serve(config: Config, stop: asyncio.Event, *, chain: str | None = None,
                 once: bool = False, bootstrap: str | None = None, backfill: int = 0) -> int:
    from .chainsvc import Publisher, build_pollers, run_pollers
    from .kafka_out import bootstrap_from

    pollers = build_pollers(config, chain)
    if not pollers:
        log.info("chain.idle", reason="no chain has rpc_urls configured")
        return 0
    publisher = Publisher(config, bootstrap_from(bootstrap, config.kafka))
    await publisher.start()
    try:
        return await run_pollers(pollers, publisher, stop, once=once, backfill_blocks=backfill)
    finally:
        await publisher.close()


async def run_service(config: Config, stop: asyncio.Event) -> None:
    """The ``chain`` service of ``run``. With no chain configured it idles until stopped:
    ``run`` treats a service that returns early as a failure and stops everything."""
    from monitor import health

    from .chainsvc import SourcesError
    from .kafka_out import ProduceError

    try:
        await _serve(config, stop)
    except (SourcesError, ProduceError) as exc:
        raise StartupError(f"chain sources: {exc}") from exc
    if not stop.is_set():
        # Idle (no chain has rpc_urls): still listed in /readyz, saying so, rather than
        # absent (which reads as "not started"). Configured chains list themselves as
        # chain:<name> while they poll.
        with health.checking("chain", health.idle_check(
                "no chain has rpc_urls configured (chains.<chain>.rpc_urls)")):
            await stop.wait()


def run(args: argparse.Namespace, config: Config) -> int:
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
                return await _serve(config, asyncio.Event(), chain=args.chain, once=True,
                                    bootstrap=args.bootstrap_servers,
                                    backfill=args.backfill_blocks)

            failures = asyncio.run(once())
            return 1 if failures else 0

        async def forever(cfg: Config, stop: asyncio.Event) -> None:
            await _serve(cfg, stop, chain=args.chain, bootstrap=args.bootstrap_servers,
                         backfill=args.backfill_blocks)

        return run_until_signalled(forever, config)
    except (SourcesError, ProduceError) as exc:
        print(f"depeg-monitor produce chain: {exc}", file=sys.stderr)
        # A bad sources file is configuration (2); a ProduceError says which it is.
        return exc.exit_code if isinstance(exc, ProduceError) else 2


service = Service(name="chain", run=run_service, order=40)
