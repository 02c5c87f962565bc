"""A real HTTP proxy in front of the real node that can misbehave on demand.

Not a fake JSON-RPC server: every request it answers is forwarded to ganache; the modes only
delay it past the client's timeout, refuse it (HTTP 503), or rewrite ``eth_blockNumber`` to
a head far behind (a lagging node).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
from aiohttp import web

from monitor.kafka.embedded import free_port


class MisbehavingProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.mode = "ok"  # ok | timeout | error | lag
        self.lag_blocks = 100
        self.requests = 0
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        body = await request.read()
        if self.mode == "timeout":
            await asyncio.sleep(30)  # the misbehaviour itself: longer than any client timeout
        if self.mode == "error":
            return web.Response(status=503, text="upstream unavailable")
        assert self._session is not None
        async with self._session.post(self.upstream, data=body,
                                      headers={"Content-Type": "application/json"}) as resp:
            reply: Any = await resp.json(content_type=None)
        if self.mode == "lag":
            calls = json.loads(body)
            items = reply if isinstance(reply, list) else [reply]
            methods = {c["id"]: c["method"] for c in (calls if isinstance(calls, list)
                                                       else [calls])}
            for item in items:
                if methods.get(item.get("id")) == "eth_blockNumber":
                    item["result"] = hex(max(0, int(item["result"], 16) - self.lag_blocks))
        return web.json_response(reply)

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        app = web.Application()
        app.router.add_post("/", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()
