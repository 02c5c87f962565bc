"""API keys: ``x-api-key`` on every route but health, metrics and the OpenAPI document."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    # Placeholder until the webhooks work lands: key checking lives here.
    return await handler(request)
