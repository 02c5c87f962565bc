"""API keys: ``x-api-key`` on every route but health, metrics and the public documents.

The middleware hashes the presented key and looks the hash up (keys are stored hashed);
a missing, unknown or revoked key is 401 with the JSON error body. The key's id goes on
the request (:data:`API_KEY_ID`) for the handlers, which scope every query by it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from ..storage.webhooks import WebhookStore
from .errors import ApiError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

HEADER = "x-api-key"
#: Request key holding the authenticated API key's id.
API_KEY_ID = web.RequestKey("api_key_id", str)
#: No key needed: probes, the metrics scrape, the OpenAPI document and E9 (public by spec).
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json", "/v3/framework"})
#: Longest key accepted (a real one is ~47 characters); longer ones are not even hashed.
MAX_KEY_LENGTH = 256


def api_key_id(request: web.Request) -> str:
    """The authenticated key's id (only on routes behind the middleware)."""
    if API_KEY_ID not in request:
        raise ApiError(401, "missing API key", header=HEADER)
    return request[API_KEY_ID]


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path in PUBLIC_PATHS:
        return await handler(request)
    key = request.headers.get(HEADER, "")
    if not key:
        raise ApiError(401, "missing API key", header=HEADER)
    if len(key) > MAX_KEY_LENGTH:
        raise ApiError(401, "invalid API key", header=HEADER)
    from .app import DB

    key_id = await WebhookStore(request.app[DB]).authenticate(key)
    if key_id is None:
        raise ApiError(401, "invalid API key", header=HEADER)
    request[API_KEY_ID] = key_id
    return await handler(request)
