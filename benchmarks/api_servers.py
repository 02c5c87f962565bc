"""The read-API benchmarks' servers: an aiohttp app served in a spawned process of its
own on a free port (:func:`server_process`), and the limit, a bare aiohttp server
answering every GET with a fixed body (:func:`serve_bare`).

Imported by bench_api.py and bench_vaults_api.py; not a command itself.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiohttp import web

from monitor.kafka.embedded import free_port


async def serve_app(app: web.Application, port: int) -> None:
    """Serve ``app`` on 127.0.0.1:``port`` (no access log) until the process is stopped."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


def serve_bare(size: int, port: int) -> None:
    """The limit: the same HTTP stack answering every GET with ``size`` fixed bytes."""
    body = b"x" * size

    async def handler(_request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", handler)
        await serve_app(app, port)

    asyncio.run(main())


async def wait_up(base: str) -> None:
    deadline = time.monotonic() + 60
    async with aiohttp.ClientSession() as s:
        while time.monotonic() < deadline:
            try:
                async with s.get(base + "/openapi.json") as resp:
                    if resp.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError("server did not come up")


@asynccontextmanager
async def server_process(target: Callable[..., None], *args: Any) -> AsyncIterator[str]:
    """``target(*args, port)`` in its own (spawned) process on a free port: yields its base
    URL once it answers, and terminates it on the way out (also when the benchmark fails)."""
    port = free_port()
    proc = mp.get_context("spawn").Process(target=target, args=(*args, port), daemon=True)
    proc.start()
    base = f"http://127.0.0.1:{port}"
    try:
        await wait_up(base)
        yield base
    finally:
        proc.terminate()
        proc.join(10)
