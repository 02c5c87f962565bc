"""``depeg-monitor api``: the HTTP API as a process (and as a service of ``run``).

The server's modules (aiohttp, the app and every resource, the database drivers) are
imported when it starts, not when this module is: ``depeg-monitor api --help`` imports
only this module and answers in a fraction of the time (benchmarks/bench_cli.py).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from ..commands import Command
from ..services import Service

if TYPE_CHECKING:
    from ..config import Config


async def serve_api(config: Config, stop: asyncio.Event) -> None:
    """Serve until ``stop`` is set; in-flight requests get a grace period to finish."""
    from aiohttp import web

    from .. import health
    from ..gcpolicy import service_started
    from ..logs import get_logger
    from ..preflight import api_port_hint
    from ..services import StartupError
    from ..storage import connect
    from .app import create_app

    log = get_logger(__name__)
    db = await connect(config.storage.url)
    try:
        app = create_app(config, db)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=10.0)
        await runner.setup()
        site = web.TCPSite(runner, config.api.host, config.api.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise StartupError(f"cannot listen on {config.api.host}:{config.api.port}: "
                               f"{exc.strerror or exc}; {api_port_hint(config.api.port)}"
                               ) from None
        port = runner.addresses[0][1] if runner.addresses else config.api.port
        log.info("api.listening", url=f"http://{config.api.host}:{port}")
        service_started("api", config.gc)
        try:
            with health.checking("api.store", health.store_check(db)):
                await stop.wait()
        finally:
            await runner.cleanup()
            log.info("api.stopped")
    finally:
        await db.close()


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", help="listen address (api.host)")
    p.add_argument("--port", type=int, help="listen port (api.port)")


def _run(args: argparse.Namespace, config: Config) -> int:
    import msgspec

    from ..services import run_until_signalled

    api = msgspec.structs.replace(
        config.api,
        host=args.host or config.api.host,
        port=args.port if args.port is not None else config.api.port,
    )
    return run_until_signalled(serve_api, msgspec.structs.replace(config, api=api), ops=False)


command = Command(
    name="api",
    help=("serve the HTTP API: /rwa, /vaults, /v3/*, /usage, /webhooks/*, /openapi.json, "
         "/metrics, /healthz, /readyz"),
    add_arguments=_add_arguments,
    run=_run,
    description=(
        "Serves the pegged-token read API and webhook management from storage.url on "
        "api.host:api.port. Every route but health, metrics and /openapi.json needs an "
        "x-api-key (create one with `depeg-monitor keys create`). Stops cleanly on SIGTERM."
    ),
)

service = Service(name="api", run=serve_api, order=80)
