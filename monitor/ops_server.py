"""The ops listener: /metrics, /healthz and /readyz for processes without the HTTP API.

The monitor, the delivery worker and the store writer (and ``run``) serve these on
``metrics.host``:``metrics.port`` so Prometheus can scrape them and Kubernetes can probe
them. The API process serves the same three routes on its own app (monitor/api/health.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from . import health, metrics
from .config import MetricsConfig
from .logs import get_logger

log = get_logger(__name__)


def create_ops_app() -> web.Application:
    app = web.Application()
    health.add_routes(app)
    return app


class OpsServer:
    """Start with ``await start()``, stop with ``await stop()``; ``port`` is the bound port
    (pass port 0 to let the OS pick one, as tests do)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 9108) -> None:
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        runner = web.AppRunner(create_ops_app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self._runner = runner
        server = site._server  # aiohttp keeps the asyncio server here; needed for port 0
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = sockets[0].getsockname()[1]
        log.info("ops.server_started", host=self.host, port=self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> OpsServer:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop()


@asynccontextmanager
async def serving(config: MetricsConfig) -> AsyncIterator[OpsServer]:
    """The ops listener for the lifetime of a process (``run``, ``monitor``, ``deliver``,
    ``store``): applies the per-token series cap and serves until the block exits."""
    metrics.set_token_cap(config.token_series_cap)
    server = OpsServer(config.host, config.port)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
