"""The `chain` service of `depeg-monitor run`: the on-chain adapters of `produce chain`.

A module of its own, named by the services entry point, so that `produce chain --help`
does not import the service framework (asyncio) for the `Service` it does not use.
"""

from __future__ import annotations

import asyncio

from monitor.config import Config
from monitor.services import Service, StartupError

from .chain_cmd import serve


async def run_service(config: Config, stop: asyncio.Event) -> None:
    """The ``chain`` service of ``run``. With no chain configured it idles until stopped:
    ``run`` treats a service that returns early as a failure and stops everything."""
    from monitor import health

    from .chainsvc import SourcesError
    from .kafka_out import ProduceError

    try:
        await serve(config, stop)
    except (SourcesError, ProduceError) as exc:
        raise StartupError(f"chain sources: {exc}") from exc
    if not stop.is_set():
        # Idle (no chain has rpc_urls): still listed in /readyz, saying so, rather than
        # absent (which reads as "not started"). Configured chains list themselves as
        # chain:<name> while they poll.
        with health.checking("chain", health.idle_check(
                "no chain has rpc_urls configured (chains.<chain>.rpc_urls)")):
            await stop.wait()


service = Service(name="chain", run=run_service, order=40)
