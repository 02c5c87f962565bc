"""API keys: ``x-api-key`` on every route but health, metrics and the public documents.

The middleware hashes the presented key and looks the hash up (keys are stored hashed),
through :class:`~monitor.api.keycache.VerifiedKeys`: a key found valid is accepted without
another lookup for ``api.key_cache_seconds`` (the bound on revocation latency); a missing,
unknown or revoked key is 401 with the JSON error body. The key's id goes on
the request (:data:`~monitor.api.context.API_KEY_ID`) for the handlers, which scope every
query by it.
"""

from __future__ import annotations

from aiohttp import web

from .context import API_KEY_HEADER, API_KEY_ID, CONFIG, DB, TICKS, Handler, api_key_id
from .errors import ApiError
from .keycache import VerifiedKeys

__all__ = ["API_KEY_ID", "HEADER", "MAX_KEY_LENGTH", "PUBLIC_PATHS", "VERIFIED_KEYS",
           "api_key_id", "auth_middleware"]

HEADER = API_KEY_HEADER
#: No key needed: probes, the metrics scrape, the OpenAPI document and E9 (public by spec).
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json", "/v3/framework"})
#: Longest key accepted (a real one is ~47 characters); longer ones are not even hashed.
MAX_KEY_LENGTH = 256
#: The app's verified-key cache, made on startup (after tests may have set the clock).
VERIFIED_KEYS = web.AppKey("verified_keys", VerifiedKeys)


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path in PUBLIC_PATHS:
        return await handler(request)
    key = request.headers.get(HEADER, "")
    if not key:
        raise ApiError(401, "missing API key", header=HEADER)
    if len(key) > MAX_KEY_LENGTH:
        raise ApiError(401, "invalid API key", header=HEADER)
    key_id = await request.app[VERIFIED_KEYS].key_id(key)
    if key_id is None:
        raise ApiError(401, "invalid API key", header=HEADER)
    request[API_KEY_ID] = key_id
    return await handler(request)


def install(app: web.Application) -> None:
    """Give ``app`` its verified-key cache when it starts (``api.key_cache_seconds``)."""
    async def make_cache(app: web.Application) -> None:
        app[VERIFIED_KEYS] = VerifiedKeys(app[DB], app[CONFIG].api.key_cache_seconds,
                                          clock=app[TICKS])
    app.on_startup.append(make_cache)
